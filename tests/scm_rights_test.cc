// SCM_RIGHTS helpers over real socketpairs: 0, 1, 2 and more descriptors,
// truncated control data, foreign control messages. Every received descriptor
// must be close-on-exec, and none may leak on an error path.
#include "common/limits.h"
#include "common/scm_rights.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstring>

namespace opencode {
namespace {

int CountOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

struct Pair {
  UniqueFd a, b;
  Pair() {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a.reset(sv[0]);
    b.reset(sv[1]);
  }
};

// Sends `nfds` descriptors (all of /tmp) with one byte, raw, to break the rules.
void SendRaw(int sock, int nfds, int level = SOL_SOCKET, int type = SCM_RIGHTS) {
  std::vector<UniqueFd> fds;
  for (int i = 0; i < nfds; ++i) fds.emplace_back(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::vector<char> control(CMSG_SPACE(std::max(sizeof(int) * std::max(nfds, 1), sizeof(struct ucred))));
  char byte = 'x';
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0 || type != SCM_RIGHTS) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * std::max(nfds, 1));
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = level;
    c->cmsg_type = type;
    if (type == SCM_RIGHTS) {
      c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
      for (int i = 0; i < nfds; ++i) {
        int fd = fds[i].get();
        memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
      }
    } else {  // SCM_CREDENTIALS with our own credentials
      struct ucred cred = {getpid(), getuid(), getgid()};
      c->cmsg_len = CMSG_LEN(sizeof cred);
      msg.msg_controllen = CMSG_SPACE(sizeof cred);
      memcpy(CMSG_DATA(c), &cred, sizeof cred);
    }
  }
  ASSERT_EQ(sendmsg(sock, &msg, 0), 1) << strerror(errno);
}

TEST(ScmRights, OneDescriptorArrivesCloexecAndIsTheDirectory) {
  Pair p;
  UniqueFd dir(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(SendWithFd(p.a.get(), "hello", 5, dir.get()), 5);
  char buf[16];
  RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf);
  ASSERT_EQ(r.bytes, 5);
  EXPECT_EQ(r.error, ErrorCode::kOk);
  ASSERT_TRUE(r.fd.valid());
  EXPECT_EQ(fcntl(r.fd.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  struct stat a, b;
  ASSERT_EQ(fstat(r.fd.get(), &a), 0);
  ASSERT_EQ(fstat(dir.get(), &b), 0);
  EXPECT_TRUE(S_ISDIR(a.st_mode));
  EXPECT_EQ(a.st_ino, b.st_ino);
}

TEST(ScmRights, ZeroDescriptors) {
  Pair p;
  SendRaw(p.a.get(), 0);
  char buf[4];
  RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf);
  EXPECT_EQ(r.bytes, 1);
  EXPECT_EQ(r.error, ErrorCode::kOk);
  EXPECT_FALSE(r.fd.valid());
}

TEST(ScmRights, TwoDescriptorsAreRejectedAndClosed) {
  Pair p;
  int before = CountOpenFds();
  SendRaw(p.a.get(), 2);
  char buf[4];
  {
    RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf);
    EXPECT_EQ(r.bytes, 1);
    EXPECT_EQ(r.error, ErrorCode::kExtraDescriptor);
    EXPECT_FALSE(r.fd.valid());
  }
  EXPECT_EQ(CountOpenFds(), before);
}

TEST(ScmRights, FiveDescriptorsAreRejectedAndAllClosed) {
  Pair p;
  int before = CountOpenFds();
  SendRaw(p.a.get(), 5);
  char buf[4];
  {
    RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf);
    EXPECT_EQ(r.error, ErrorCode::kExtraDescriptor);
    EXPECT_FALSE(r.fd.valid());
  }
  EXPECT_EQ(CountOpenFds(), before);
}

// Every descriptor the kernel attaches to one message (kMaxRightsPerMessage)
// is received, so none is dropped by the kernel inside recvmsg (where its
// last close would run in the receiving thread); all but none are handed to
// the caller's discard, and closed.
int discarded = 0;
void CountAndClose(UniqueFd fd) noexcept {
  if (fd) ++discarded;
}

TEST(ScmRights, ManyDescriptorsAreAllReceivedAndDiscarded) {
  for (int n : {3, 32, int(limits::kMaxRightsPerMessage)}) {
    Pair p;
    int before = CountOpenFds();
    SendRaw(p.a.get(), n);
    char buf[4];
    discarded = 0;
    {
      RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf, 0, &CountAndClose);
      EXPECT_EQ(r.error, ErrorCode::kExtraDescriptor) << n;
      EXPECT_FALSE(r.fd.valid());
    }
    EXPECT_EQ(discarded, n) << "every descriptor reached the discard";
    EXPECT_EQ(CountOpenFds(), before);
  }
}

TEST(ScmRights, WithoutADiscardExtraDescriptorsAreClosed) {
  Pair p;
  int before = CountOpenFds();
  SendRaw(p.a.get(), 32);
  char buf[4];
  {
    RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf);
    EXPECT_EQ(r.error, ErrorCode::kExtraDescriptor);
    EXPECT_FALSE(r.fd.valid());
  }
  EXPECT_EQ(CountOpenFds(), before);
}

TEST(ScmRights, APacketWithDescriptorsIsRefusedAndTheyAreDiscarded) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  int before = CountOpenFds();
  SendRaw(a.get(), 5);
  char buf[4];
  bool refused = false;
  discarded = 0;
  EXPECT_EQ(RecvPacket(b.get(), buf, sizeof buf, 0, &refused, &CountAndClose), 1);
  EXPECT_TRUE(refused);
  EXPECT_EQ(discarded, 5);
  EXPECT_EQ(CountOpenFds(), before);
}

TEST(ScmRights, ForeignControlMessageIsRejected) {
  Pair p;
  int on = 1;
  ASSERT_EQ(setsockopt(p.b.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0);
  SendRaw(p.a.get(), 0, SOL_SOCKET, SCM_CREDENTIALS);
  char buf[4];
  RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf);
  EXPECT_EQ(r.error, ErrorCode::kBadControl);
}

TEST(ScmRights, EofAndErrno) {
  Pair p;
  p.a.reset();
  char buf[4];
  RecvFdResult r = RecvWithFd(p.b.get(), buf, sizeof buf);
  EXPECT_EQ(r.bytes, 0);
  UniqueFd notsock(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  r = RecvWithFd(notsock.get(), buf, sizeof buf);
  EXPECT_EQ(r.bytes, -ENOTSOCK);
  EXPECT_EQ(SendWithFd(notsock.get(), "x", 1, notsock.get()), -ENOTSOCK);
  EXPECT_EQ(SendWithFd(p.b.get(), "", 0, notsock.get()), -EINVAL);
}

TEST(ScmRights, DescriptorTravelsWithFirstByteOnly) {
  // A short read: the descriptor comes with the first segment, later reads of
  // the same message carry none.
  Pair p;
  UniqueFd dir(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(SendWithFd(p.a.get(), "abcdef", 6, dir.get()), 6);
  char buf[2];
  RecvFdResult r1 = RecvWithFd(p.b.get(), buf, sizeof buf);
  EXPECT_EQ(r1.bytes, 2);
  EXPECT_TRUE(r1.fd.valid());
  RecvFdResult r2 = RecvWithFd(p.b.get(), buf, sizeof buf);
  EXPECT_EQ(r2.bytes, 2);
  EXPECT_FALSE(r2.fd.valid());
}

TEST(UniqueFd, MoveAndRelease) {
  UniqueFd a(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), raw);
  int taken = b.release();
  EXPECT_FALSE(b.valid());
  EXPECT_EQ(fcntl(taken, F_GETFD) >= 0, true);  // still open: ownership left
  UniqueFd c(taken);
  c.reset();
  EXPECT_EQ(fcntl(taken, F_GETFD), -1);  // closed by reset
}

}  // namespace
}  // namespace opencode
