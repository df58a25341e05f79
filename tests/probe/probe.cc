// probe: the "command" the launcher tests run inside the PTY. It records what a
// command really receives -- argv bytes, environment, cwd, open descriptors,
// terminals, window size, signal state, uid -- in ./probe-report (relative, so
// the report's location also proves the working directory), hex-encoded so
// every byte survives. Test-only; dynamically linked is fine.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern char** environ;

namespace {

std::string Hex(const char* p, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

// "SigBlk:\t0000000000000000" style lines of /proc/self/status.
std::string StatusField(const char* name) {
  FILE* f = fopen("/proc/self/status", "re");
  if (f == nullptr) return "?";
  char line[512];
  std::string value = "?";
  size_t n = strlen(name);
  while (fgets(line, sizeof line, f) != nullptr) {
    if (strncmp(line, name, n) == 0 && line[n] == ':') {
      value = line + n + 1;
      while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
      while (!value.empty() && (value.front() == '\t' || value.front() == ' ')) value.erase(0, 1);
    }
  }
  fclose(f);
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::string r;
  r += "argc " + std::to_string(argc) + "\n";
  for (int i = 0; i < argc; ++i) r += "arg " + Hex(argv[i], strlen(argv[i])) + "\n";
  for (char** e = environ; *e != nullptr; ++e) r += "env " + Hex(*e, strlen(*e)) + "\n";
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) != nullptr) r += "cwd " + Hex(cwd, strlen(cwd)) + "\n";
  // Open descriptors, excluding the one opendir() itself holds.
  if (DIR* d = opendir("/proc/self/fd")) {
    int self = dirfd(d);
    while (struct dirent* de = readdir(d)) {
      if (de->d_name[0] == '.') continue;
      int fd = atoi(de->d_name);
      if (fd == self) continue;
      char target[4096];
      std::string path = std::string("/proc/self/fd/") + de->d_name;
      ssize_t n = readlink(path.c_str(), target, sizeof target);
      r += "fd " + std::to_string(fd) + " " + Hex(target, n > 0 ? size_t(n) : 0) + "\n";
    }
    closedir(d);
  }
  for (int fd = 0; fd <= 2; ++fd) {
    const char* name = isatty(fd) ? ttyname(fd) : nullptr;
    r += "tty " + std::to_string(fd) + " " + (name != nullptr ? name : "-") + "\n";
  }
  struct winsize ws = {};
  if (ioctl(0, TIOCGWINSZ, &ws) == 0)
    r += "winsize " + std::to_string(ws.ws_row) + " " + std::to_string(ws.ws_col) + "\n";
  r += "sigblk " + StatusField("SigBlk") + "\n";
  r += "sigign " + StatusField("SigIgn") + "\n";
  r += "uid " + std::to_string(getuid()) + "\n";
  r += "pgrp-is-foreground " + std::to_string(tcgetpgrp(0) == getpgrp()) + "\n";
  r += "end\n";

  // Written whole, then renamed: a report exists only if it is complete.
  FILE* f = fopen("probe-report.tmp", "we");
  if (f == nullptr) return 90;
  if (fwrite(r.data(), 1, r.size(), f) != r.size() || fclose(f) != 0) return 91;
  if (rename("probe-report.tmp", "probe-report") != 0) return 92;
  static const char kDone[] = "probe-done\n";
  (void)!write(1, kDone, sizeof kDone - 1);
  return 0;
}
