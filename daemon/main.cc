// opencode-pty-supervisor: block signals, drop every capability, build the
// Supervisor, run the loop. Everything else lives in the opencode_daemon library.
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "daemon/base/async_close.h"
#include "daemon/base/journal.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/caps.h"
#include "daemon/listener.h"
#include "daemon/supervisor.h"

using namespace opencode::daemon;

int main() {
  // SIGTERM/SIGINT arrive through sd_event_add_signal (which needs them
  // blocked on systemd 252); SIGPIPE never: every send uses MSG_NOSIGNAL.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) < 0) return EXIT_FAILURE;
  signal(SIGPIPE, SIG_IGN);
  // After the mask: the closer thread must never take SIGTERM/SIGINT.
  if (absl::Status st = StartAsyncClose(); !st.ok()) {
    Log(LOG_CRIT, absl::StrCat("Failed to start the closer thread: ", st.message()));
    return EXIT_FAILURE;
  }

  if (absl::Status st = DropAllCapabilities(); !st.ok()) {
    Log(LOG_CRIT, absl::StrCat("Failed to drop capabilities: ", st.message()));
    return EXIT_FAILURE;
  }
  auto socket = Listener::FromSystemd();
  if (!socket.ok()) {
    Log(LOG_CRIT, absl::StrCat("Failed to get the listening socket: ", socket.status().message()));
    return EXIT_FAILURE;
  }
  sd_event* raw = nullptr;
  if (int r = sd_event_default(&raw); r < 0) return EXIT_FAILURE;
  EventPtr event(raw);
  sd_event_set_watchdog(event.get(), true);  // only if WatchdogSec= is set

  auto supervisor = std::make_unique<Supervisor>(event.get(), std::move(*socket));
  if (absl::Status st = supervisor->Start(); !st.ok()) {
    Log(LOG_CRIT, absl::StrCat("Failed to start: ", st.message()));
    return EXIT_FAILURE;
  }
  int r = sd_event_loop(event.get());
  supervisor.reset();  // flushes the bus (pending StopUnit calls) before exit
  if (r < 0) {
    Log(LOG_CRIT, absl::StrCat("Event loop failed: ", strerror(-r)));
    return EXIT_FAILURE;
  }
  return r;
}
