// The PTY unit's fixed property set: the StartTransientUnit message carries
// exactly the documented properties (descriptors as 'h', the launcher with
// the canonical encoding of each argument, and no AddRef: nothing may
// reference a PTY unit), and session unit names
// are exactly opencode-pty-<32 lowercase hex>.service.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/base64url.h"
#include "common/limits.h"
#include "common/unique_fd.h"
#include "daemon/systemd/constants.h"
#include "daemon/systemd/unit_properties.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

UnitRequest Request() {
  UnitRequest r;
  r.session_id = "0123456789abcdef0123456789abcdef";
  r.unit_name = SessionUnitName(r.session_id);
  r.uid = 1000;
  r.cols = 120;
  r.rows = 40;
  r.argv = {"printf", "%s\n", "a b", "", "$(id)", std::string("\xff\x01", 2)};
  return r;
}

TEST(UnitProperties, StartTransientUnitMessageHasTheFixedSet) {
  testing::MessageFactory f;
  sd_bus_message* raw = nullptr;
  ASSERT_GE(sd_bus_message_new_method_call(f.bus(), &raw, kSystemdService, kSystemdPath,
                                           kManagerInterface, "StartTransientUnit"),
            0);
  MessagePtr m(raw);
  UniqueFd stream(open("/dev/null", O_RDWR | O_CLOEXEC));
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(AppendStartTransientUnit(m.get(), Request(), stream.get(), dir.get()).ok());
  ASSERT_GE(sd_bus_message_seal(m.get(), 1, 0), 0);
  ASSERT_GE(sd_bus_message_rewind(m.get(), 1), 0);

  const char *name = nullptr, *mode = nullptr;
  ASSERT_GT(sd_bus_message_read(m.get(), "ss", &name, &mode), 0);
  EXPECT_STREQ(name, "opencode-pty-0123456789abcdef0123456789abcdef.service");
  EXPECT_STREQ(mode, "fail");
  std::map<std::string, std::string> types;
  std::vector<std::string> exec_argv;
  ASSERT_GT(sd_bus_message_enter_container(m.get(), 'a', "(sv)"), 0);
  while (sd_bus_message_enter_container(m.get(), 'r', "sv") > 0) {
    const char* prop = nullptr;
    sd_bus_message_read_basic(m.get(), 's', &prop);
    const char* contents = nullptr;
    sd_bus_message_peek_type(m.get(), nullptr, &contents);
    EXPECT_FALSE(types.contains(prop)) << prop << " twice";
    types[prop] = contents;
    if (std::string(prop) == "ExecStart") {
      sd_bus_message_enter_container(m.get(), 'v', "a(sasb)");
      sd_bus_message_enter_container(m.get(), 'a', "(sasb)");
      sd_bus_message_enter_container(m.get(), 'r', "sasb");
      const char* path = nullptr;
      sd_bus_message_read_basic(m.get(), 's', &path);
      EXPECT_STREQ(path, kLauncherPath);
      char** strv = nullptr;
      sd_bus_message_read_strv(m.get(), &strv);
      for (char** s = strv; *s; ++s) exec_argv.emplace_back(*s), free(*s);
      free(strv);
      int ignore = 1;
      sd_bus_message_read_basic(m.get(), 'b', &ignore);
      EXPECT_EQ(ignore, 0);
      sd_bus_message_exit_container(m.get());
      sd_bus_message_exit_container(m.get());
      sd_bus_message_exit_container(m.get());
    } else {
      sd_bus_message_skip(m.get(), "v");
    }
    sd_bus_message_exit_container(m.get());
  }
  std::map<std::string, std::string> want = {
      {"Description", "s"}, {"CollectMode", "s"}, {"Slice", "s"}, {"Type", "s"},
      {"User", "s"}, {"ExecStart", "a(sasb)"}, {"Environment", "as"}, {"RemainAfterExit", "b"},
      {"KillMode", "s"}, {"SendSIGKILL", "b"}, {"SendSIGHUP", "b"}, {"TimeoutStopUSec", "t"},
      {"TasksMax", "t"}, {"CPUWeight", "t"}, {"LimitCORE", "t"}, {"IgnoreSIGPIPE", "b"}, {"NoNewPrivileges", "b"},
      {"LockPersonality", "b"}, {"RestrictRealtime", "b"}, {"RestrictSUIDSGID", "b"},
      {"StandardInputFileDescriptor", "h"}, {"StandardOutputFileDescriptor", "h"},
      {"StandardErrorFileDescriptor", "h"}};
  EXPECT_EQ(types, want);
  ASSERT_EQ(exec_argv.size(), Request().argv.size() + 1);
  EXPECT_EQ(exec_argv[0], kLauncherPath);
  for (size_t i = 0; i < Request().argv.size(); ++i) {
    std::string enc;
    EncodeArg(Request().argv[i], &enc);
    EXPECT_EQ(exec_argv[i + 1], enc);
    std::string dec;
    EXPECT_EQ(DecodeArg(exec_argv[i + 1], &dec), ErrorCode::kOk);
    EXPECT_EQ(dec, Request().argv[i]) << "argument keeps its bytes";
  }
}

TEST(UnitProperties, LargestAcceptedArgvEncodesToExactlyTheLaunchersBound) {
  // kMaxArgs arguments of kMaxArgvTotalBytes / kMaxArgs bytes: what the start
  // frame decoder accepts at its limits, encoded as ExecStart= carries it.
  UnitRequest req = Request();
  req.argv.assign(limits::kMaxArgs, std::string(limits::kMaxArgvTotalBytes / limits::kMaxArgs, 'x'));
  const ExecCommand* exec = nullptr;
  std::vector<PropertySpec> specs = BuildPropertySpecs(req);
  for (const auto& spec : specs)
    if (std::string(spec.name) == "ExecStart") exec = &std::get<std::vector<ExecCommand>>(spec.value).at(0);
  ASSERT_NE(exec, nullptr);
  ASSERT_EQ(exec->argv.size(), limits::kMaxArgs + 1);  // the launcher's own argv[0] first
  size_t joined = exec->argv.size() - 2;                // separators between the encoded arguments
  for (size_t i = 1; i < exec->argv.size(); ++i) joined += exec->argv[i].size();
  EXPECT_EQ(joined, limits::kMaxEncodedArgvBytes);
  // Any other split of the same bytes encodes to no more.
  for (size_t each : {1u, 2u, 3u, 63u, 65u, 100u}) {
    req.argv.assign(std::min(limits::kMaxArgs, limits::kMaxArgvTotalBytes / each), std::string(each, 'y'));
    size_t n = req.argv.size() - 1;
    for (const auto& a : req.argv) n += EncodedArgLength(a.size());
    EXPECT_LE(n, limits::kMaxEncodedArgvBytes) << each;
  }
}

TEST(UnitProperties, SpecValues) {
  std::map<std::string, PropValue> v;
  for (const auto& s : BuildPropertySpecs(Request())) v[s.name] = s.value;
  EXPECT_EQ(v["User"], PropValue(std::string("1000")));
  EXPECT_EQ(v["Slice"], PropValue(std::string("opencode-pty.slice")));
  EXPECT_EQ(v["Type"], PropValue(std::string("exec")));
  EXPECT_EQ(v["Environment"], PropValue(std::vector<std::string>{"COLUMNS=120", "LINES=40"}));
  EXPECT_EQ(v["TimeoutStopUSec"], PropValue(uint64_t{limits::kUnitStopTimeoutUsec}));
  EXPECT_EQ(v["TasksMax"], PropValue(uint64_t{limits::kUnitTasksMax}));
  EXPECT_EQ(v["CPUWeight"], PropValue(uint64_t{limits::kUnitStartCpuWeight}));
  EXPECT_EQ(v["LimitCORE"], PropValue(uint64_t{0}));
  EXPECT_EQ(v["NoNewPrivileges"], PropValue(true));
  EXPECT_EQ(v["KillMode"], PropValue(std::string("control-group")));
  EXPECT_EQ(v["CollectMode"], PropValue(std::string("inactive")));
  EXPECT_EQ(v["RemainAfterExit"], PropValue(false));
  // Description names the session, never the command.
  EXPECT_EQ(v["Description"], PropValue(std::string("opencode PTY session 0123456789abcdef0123456789abcdef")));
}

TEST(UnitProperties, DropInsFragmentAndStdioAreReadBackNotRequested) {
  // Issue #21 point 4: a drop-in adds properties the table never reads; the
  // read-back refuses any, and names it.
  UnitRequest req = Request();
  std::map<std::string, const PropertySpec*> v;
  std::vector<PropertySpec> specs = BuildPropertySpecs(req);
  for (const auto& s : specs) v[s.name] = &s;
  ASSERT_TRUE(v.contains("DropInPaths") && v.contains("FragmentPath") && v.contains("StandardInput") &&
              v.contains("StandardOutput") && v.contains("StandardError"));
  EXPECT_EQ(v["DropInPaths"]->value, PropValue(std::vector<std::string>{}));
  EXPECT_EQ(v["FragmentPath"]->value, PropValue("/run/systemd/transient/" + req.unit_name));
  EXPECT_EQ(v["StandardInput"]->value, PropValue(std::string("null")));
  EXPECT_EQ(v["StandardOutput"]->value, PropValue(std::string("journal")));
  EXPECT_EQ(v["StandardError"]->value, PropValue(std::string("inherit")));
  for (const char* n : {"DropInPaths", "FragmentPath", "StandardInput", "StandardOutput", "StandardError"})
    EXPECT_FALSE(v[n]->request) << n << " is read back only";
  // A planted drop-in: refused, and the message names it.
  PropMap unit, service;
  for (const auto& s : specs) (s.iface == Interface::kUnit ? unit : service)[s.name] = s.value;
  unit["Refs"] = std::vector<std::string>{};
  ASSERT_TRUE(VerifyReadBack(specs, unit, service).ok());
  unit["DropInPaths"] = std::vector<std::string>{"/etc/systemd/system/opencode-pty-.service.d/x.conf"};
  // What the drop-in changed reads back too; the drop-in is what is named.
  service["Environment"] = std::vector<std::string>{"COLUMNS=120", "LINES=40", "PLANTED=1"};
  absl::Status st = VerifyReadBack(specs, unit, service);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(st.message()).find("/etc/systemd/system/opencode-pty-.service.d/x.conf"), std::string::npos)
      << st;
}

// ---- GetAll decoding of only the wanted properties (the profile's fix)

MessagePtr BigReply(testing::MessageFactory& f, const std::vector<testing::Prop>& wanted_props) {
  std::vector<testing::Prop> props;
  // 250 properties nobody reads, of several types, around the wanted ones.
  for (int i = 0; i < 125; ++i) props.push_back(testing::S("Unread" + std::to_string(i), "x"));
  for (const auto& p : wanted_props) props.push_back(p);
  for (int i = 0; i < 125; ++i) props.push_back(testing::T("UnreadT" + std::to_string(i), i));
  return f.Reply([&](sd_bus_message* m) { testing::WriteProps(m, props); });
}

TEST(PropertyFilter, KeepsExactlyTheWantedNamesWithTheirValues) {
  testing::MessageFactory f;
  std::vector<testing::Prop> wanted = {testing::S("ActiveState", "active"), testing::U("MainPID", 7),
                                       testing::B("Transient", true)};
  auto all = ReadPropertyMap(BigReply(f, wanted).get());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 253u);
  PropNameSet names = {"ActiveState", "MainPID", "Transient", "NotInTheReply"};
  auto some = ReadPropertyMap(BigReply(f, wanted).get(), names);
  ASSERT_TRUE(some.ok()) << some.status();
  ASSERT_EQ(some->size(), 3u);
  for (const auto& [name, value] : *some) EXPECT_EQ(all->at(name), value) << name;
}

TEST(PropertyFilter, AWantedNameTwiceStillRejectsTheReply) {
  testing::MessageFactory f;
  auto m = BigReply(f, {testing::S("ActiveState", "active"), testing::S("ActiveState", "failed")});
  auto r = ReadPropertyMap(m.get(), PropNameSet{"ActiveState"});
  EXPECT_FALSE(r.ok());
}

TEST(PropertyFilter, AnUnwantedNameTwiceIsSkippedNotJudged) {
  // Found by fuzz.dbus_identity's model check (fuzz/corpus/dbus_identity/
  // regression-unwanted-name-twice): only wanted names are decoded, so only
  // they can be duplicates; the unfiltered decoder still rejects the reply.
  testing::MessageFactory f;
  auto m = BigReply(f, {testing::S("Unread7", "again"), testing::S("ActiveState", "active")});
  auto some = ReadPropertyMap(m.get(), PropNameSet{"ActiveState"});
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_EQ(some->size(), 1u);
  auto m2 = BigReply(f, {testing::S("Unread7", "again")});
  EXPECT_FALSE(ReadPropertyMap(m2.get()).ok());
}

TEST(PropertyFilter, SnapshotNamesCoverTheReadBackAndTheStateReaders) {
  UnitRequest req;
  for (const PropertySpec& spec : BuildPropertySpecs(req))
    EXPECT_TRUE(SnapshotPropertyNames(spec.iface).contains(spec.name)) << spec.name;
  for (const char* n : {"Refs", "Job", "ActiveState", "InvocationID"})
    EXPECT_TRUE(SnapshotPropertyNames(Interface::kUnit).contains(n)) << n;
  for (const char* n : {"ExecMainStartTimestampMonotonic", "ExecMainCode", "ExecMainStatus", "Result"})
    EXPECT_TRUE(SnapshotPropertyNames(Interface::kService).contains(n)) << n;
  EXPECT_LT(SnapshotPropertyNames(Interface::kService).size(), 40u);
}

TEST(UnitProperties, SessionUnitNames) {
  EXPECT_TRUE(IsSessionUnitName("opencode-pty-0123456789abcdef0123456789abcdef.service"));
  EXPECT_FALSE(IsSessionUnitName("opencode-pty-supervisor.service"));
  EXPECT_FALSE(IsSessionUnitName("opencode-pty-0123456789ABCDEF0123456789abcdef.service"));
  EXPECT_FALSE(IsSessionUnitName("opencode-pty-0123456789abcdef0123456789abcde.service"));
  EXPECT_FALSE(IsSessionUnitName("opencode-pty-0123456789abcdef0123456789abcdef.socket"));
  EXPECT_FALSE(IsSessionUnitName("xopencode-pty-0123456789abcdef0123456789abcdef.service"));
}

}  // namespace
}  // namespace opencode::daemon
