// Hang attribution over NCCL RAS: the report parser on documented and
// constructed reports (tests/fixtures/ras, provenance in its README), the
// rule, the client against tests/fakes/fake_ras (a real socket speaking
// RAS's protocol: normal, old, silent, garbage, huge, endless), the
// listener-owner check through a fixture /proc, and the probe end to end.
// No assertion is on timing; short bounds only keep the tests quick.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "preflight/hang_probe.h"
#include "preflight/hang_rule.h"
#include "preflight/ras_client.h"
#include "preflight/ras_status.h"
#include "preflight/supervisor.h"
#include "preflight_test/temp_dir.h"

namespace preflight {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream f(std::string(PF_RAS_FIXTURES) + "/" + name);
  std::ostringstream s;
  s << f.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

RasSnapshot Parsed(const std::string& name) {
  auto s = ParseRasStatus(Fixture(name));
  EXPECT_TRUE(s.ok()) << name << ": " << s.status().message();
  return s.ok() ? *s : RasSnapshot();
}

std::string NodeOf(const std::string& host) {
  static const std::map<std::string, std::string> m = {
      {"127.0.1.101", "n1"}, {"127.0.1.102", "n2"}, {"127.0.1.103", "n3"}, {"172.16.64.210", "gpu10"}, {"172.16.64.213", "gpu13"}};
  auto it = m.find(host);
  return it == m.end() ? "" : it->second;
}

TEST(RasStatus, HealthyTextReportHasNoFinding) {
  RasSnapshot s = Parsed("healthy_2.26.txt");
  EXPECT_EQ(s.nccl_version, "2.26.2");
  EXPECT_EQ(s.format, "text");
  EXPECT_TRUE(s.dead.empty());
  EXPECT_TRUE(s.comms.empty());
  HangFinding f = AttributeHang({s, s, s}, NodeOf);
  EXPECT_EQ(f.cause, HangCause::kEqualCounts);
  EXPECT_TRUE(f.nodes.empty());
  EXPECT_NE(f.line.find("no node named"), std::string::npos) << f.line;
}

TEST(RasStatus, IncompleteProcessNamesItsNodeAtOnce) {
  RasSnapshot s = Parsed("incomplete_2.25.txt");
  ASSERT_EQ(s.unresponsive.size(), 1u);
  EXPECT_EQ(s.unresponsive[0].pid, 3487984);
  EXPECT_EQ(s.unresponsive[0].host, "172.16.64.213");
  EXPECT_EQ(s.unresponsive[0].gpu, "5");
  ASSERT_EQ(s.comms.size(), 1u);
  ASSERT_EQ(s.comms[0].missing.size(), 1u);
  EXPECT_EQ(s.comms[0].missing[0].rank, 21);
  EXPECT_EQ(s.timeouts, 2);
  EXPECT_TRUE(RasNamesAtOnce(s));
  HangFinding f = AttributeHang({s}, NodeOf);
  EXPECT_EQ(f.cause, HangCause::kUnresponsive);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"gpu13"});
  EXPECT_NE(f.line.find("pid 3487984, GPU 5) on gpu13"), std::string::npos) << f.line;
}

TEST(RasStatus, DeadProcessNamesItsNode) {
  RasSnapshot s = Parsed("dead_2.29.txt");
  ASSERT_EQ(s.dead.size(), 1u);
  EXPECT_EQ(s.dead[0].host, "127.0.1.102");
  HangFinding f = AttributeHang({s}, NodeOf);
  EXPECT_EQ(f.cause, HangCause::kDead);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"n2"});
  EXPECT_NE(f.line.find("considers dead: (pid 4242, GPU 0) on n2"), std::string::npos) << f.line;
}

TEST(RasStatus, AnAddressOfNoJobNodeIsSaidNotNamed) {
  RasSnapshot s = Parsed("dead_2.29.txt");
  HangFinding f = AttributeHang({s}, [](const std::string&) { return std::string(); });
  EXPECT_TRUE(f.nodes.empty());
  EXPECT_NE(f.line.find("127.0.1.102 (no node of this job)"), std::string::npos) << f.line;
}

TEST(RasStatus, MismatchOldWordingListsTheRanksBehind) {
  RasSnapshot s = Parsed("mismatch_2.25.txt");
  ASSERT_EQ(s.comms.size(), 1u);
  const RasComm& c = s.comms[0];
  EXPECT_TRUE(c.mismatch);
  ASSERT_EQ(c.lags.size(), 6u);
  for (const auto& l : c.lags) {
    EXPECT_EQ(l.launched, 6649u);
    EXPECT_EQ(l.ahead, 6650u);
    EXPECT_EQ(l.rank.proc.host, "172.16.64.210");
  }
  HangFinding f = AttributeHang({s, s, s}, NodeOf);
  EXPECT_EQ(f.cause, HangCause::kBehind);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"gpu10"});
  EXPECT_NE(f.line.find("no progress over 3 RAS reports"), std::string::npos) << f.line;
}

TEST(RasStatus, CountsThatMoveNameNoOne) {
  RasSnapshot a = Parsed("mismatch_2.25.txt");
  std::string moved = Fixture("mismatch_2.25.txt");
  for (auto [from, to] : {std::pair<std::string, std::string>{"6650", "6700"}, {"6649", "6699"}})
    moved.replace(moved.find(from), from.size(), to);
  auto b = ParseRasText(moved);
  ASSERT_TRUE(b.ok());
  HangFinding f = AttributeHang({a, *b}, NodeOf);
  EXPECT_EQ(f.cause, HangCause::kProgressing);
  EXPECT_TRUE(f.nodes.empty());
  EXPECT_EQ(AttributeHang({a}, NodeOf).cause, HangCause::kProgressing);  // one report: progress unknown
}

TEST(RasStatus, PerCollectiveBlocksOfNewerReleases) {
  RasSnapshot s = Parsed("mismatch_2.29.txt");
  ASSERT_EQ(s.comms.size(), 1u);
  ASSERT_EQ(s.comms[0].lags.size(), 1u);
  const RasLag& l = s.comms[0].lags[0];
  EXPECT_EQ(l.collective, "AllReduce");
  EXPECT_EQ(l.rank.rank, 2);
  EXPECT_EQ(l.launched, 1200u);
  EXPECT_EQ(l.ahead, 1201u);
  HangFinding f = AttributeHang({s, s}, NodeOf);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"n3"});
  EXPECT_NE(f.line.find("1200 AllReduce launched, others 1201"), std::string::npos) << f.line;
}

TEST(RasStatus, JsonReports) {
  RasSnapshot h = Parsed("healthy_2.29.json");
  EXPECT_EQ(h.format, "json");
  EXPECT_EQ(h.nccl_version, "2.29.2");
  ASSERT_EQ(h.comms.size(), 1u);
  EXPECT_TRUE(h.comms[0].lags.empty());
  EXPECT_EQ(AttributeHang({h, h}, NodeOf).cause, HangCause::kEqualCounts);

  RasSnapshot m = Parsed("mismatch_2.29.json");
  ASSERT_EQ(m.comms[0].lags.size(), 1u);
  EXPECT_EQ(m.comms[0].lags[0].rank.proc.host, "127.0.1.103");
  EXPECT_EQ(AttributeHang({m, m, m}, NodeOf).nodes, std::vector<std::string>{"n3"});
}

TEST(RasStatus, TheMissingCommaOf2289IsRepaired) {
  RasSnapshot s = Parsed("missing_2.28.9.json");
  ASSERT_EQ(s.unresponsive.size(), 1u);
  EXPECT_EQ(s.unresponsive[0].host, "127.0.1.102");
  EXPECT_EQ(s.timeouts, 1);
  HangFinding f = AttributeHang({s}, NodeOf);
  EXPECT_EQ(f.cause, HangCause::kUnresponsive);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"n2"});
}

TEST(RasStatus, GarbageIsAnError) {
  EXPECT_FALSE(ParseRasStatus("").ok());
  EXPECT_FALSE(ParseRasStatus("HTTP/1.1 200 OK\r\n\r\n<html>").ok());
  EXPECT_FALSE(ParseRasStatus("{ \"nccl_version\": ").ok());
  EXPECT_FALSE(ParseRasStatus(std::string(4096, '\0')).ok());
  EXPECT_EQ(AttributeHang({}, NodeOf).cause, HangCause::kNoReport);
}

TEST(RasStatus, Versions) {
  EXPECT_TRUE(RasVersionLess("2.26.2", "2.27.3"));
  EXPECT_FALSE(RasVersionLess("2.28.10", "2.28.9"));
  EXPECT_TRUE(RasVersionLess("2.28", "2.28.1"));
  EXPECT_FALSE(RasVersionLess("2.27.3", "2.27.3"));
  EXPECT_FALSE(RasVersionLess("", "2.27.3"));
  EXPECT_FALSE(RasVersionLess("2.x", "2.27.3"));
}

TEST(RasClient, Addresses) {
  auto a = ParseRasAddr("localhost:28028");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 28028);
  auto b = ParseRasAddr("[::1]:28100");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->Text(), "[::1]:28100");
  auto c = ParseRasAddr("127.0.0.1");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, kRasDefaultPort);
  EXPECT_FALSE(ParseRasAddr("localhost:0").ok());
  EXPECT_FALSE(ParseRasAddr("localhost:99999").ok());
  EXPECT_FALSE(ParseRasAddr("a;rm -rf /:1").ok());
  EXPECT_FALSE(ParseRasAddr("").ok());
}

TEST(RasClient, ListenerOwnerFromProcNetTcp) {
  preflight_test::TempDir d("ras-proc");
  std::filesystem::create_directories(d.path() + "/proc/net");
  // 127.0.0.1:28100 (0x6DC4) owned by 1001; *:28200 (0x6E28) by 1002.
  std::ofstream(d.path() + "/proc/net/tcp")
      << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      << "   0: 0100007F:6DC4 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 1 1 0 100 0 0 10 0\n"
      << "   1: 0100007F:6DC4 0100007F:9999 01 00000000:00000000 00:00000000 00000000  1003        0 2 1 0 100 0 0 10 0\n"
      << "   2: 00000000:6E28 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 3 1 0 100 0 0 10 0\n";
  FsRoot fs(d.path());
  auto u = TcpListenerUid(fs, "127.0.0.1", 28100);
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(*u, 1001u);
  auto w = TcpListenerUid(fs, "127.0.0.1", 28200);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, 1002u);
  EXPECT_EQ(TcpListenerUid(fs, "127.0.0.1", 28300).status().code(), Status::Code::kNotFound);
}

// A fake_ras process on 127.0.0.1, an ephemeral port; killed on scope exit.
class FakeRas {
 public:
  FakeRas(const std::string& replies, const std::string& mode) : dir_("fake-ras") {
    std::string ready = dir_.path() + "/port";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl(PF_FAKE_RAS, PF_FAKE_RAS, "--listen", "127.0.0.1:0", "--reply", replies.c_str(), "--mode", mode.c_str(),
              "--ready", ready.c_str(), "--max-seconds", "120", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 3000 && !std::filesystem::exists(ready); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream(ready) >> port_;
  }
  ~FakeRas() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  RasQueryOptions Query(double reply_s = 10) const {
    RasQueryOptions o;
    o.ep.host = "127.0.0.1";
    o.ep.port = static_cast<uint16_t>(port_);
    o.connect_s = 2;
    o.reply_s = reply_s;
    o.uid = ::getuid();
    return o;
  }
  int port() const { return port_; }

 private:
  preflight_test::TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string FixturePath(const std::string& name) { return std::string(PF_RAS_FIXTURES) + "/" + name; }

TEST(RasClient, JsonWhenTheServerSpeaksItTextBefore2287) {
  FakeRas json(FixturePath("mismatch_2.29.json"), "normal");
  ASSERT_GT(json.port(), 0);
  auto r = QueryRas(json.Query());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->format, "json");
  EXPECT_EQ(r->text, Fixture("mismatch_2.29.json"));  // both parts, to the close

  FakeRas old(FixturePath("mismatch_2.25.txt"), "old");
  auto t = QueryRas(old.Query());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->format, "text");
  auto s = ParseRasStatus(t->text);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->nccl_version, "2.25.1");
}

TEST(RasClient, BadServersAreBoundedAndSaid) {
  {
    FakeRas silent(FixturePath("healthy_2.26.txt"), "silent");
    auto r = QueryRas(silent.Query());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("no protocol reply within 2 s"), std::string::npos) << r.status().message();
  }
  {
    FakeRas garbage(FixturePath("healthy_2.26.txt"), "garbage");
    auto r = QueryRas(garbage.Query());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("not NCCL's RAS"), std::string::npos) << r.status().message();
  }
  {
    FakeRas huge(FixturePath("healthy_2.26.txt"), "huge");
    auto o = huge.Query();
    o.max_bytes = 1 << 20;
    auto r = QueryRas(o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("reply over 1048576 bytes"), std::string::npos) << r.status().message();
  }
  {
    FakeRas endless(FixturePath("healthy_2.26.txt"), "endless");
    auto r = QueryRas(endless.Query(1));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("did not end within 1 s"), std::string::npos) << r.status().message();
  }
  {
    FakeRas gone(FixturePath("healthy_2.26.txt"), "normal");
    auto o = gone.Query();
    o.ep.port = 1;  // nothing listens there
    o.check_owner = false;
    EXPECT_FALSE(QueryRas(o).ok());
  }
}

TEST(RasClient, AnotherUsersListenerIsNotAsked) {
  FakeRas ras(FixturePath("dead_2.29.txt"), "normal");
  auto o = ras.Query();
  o.uid = ::getuid() + 1;  // as if the job's user were someone else
  auto r = QueryRas(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("belongs to uid " + std::to_string(::getuid())), std::string::npos)
      << r.status().message();
}

// One attribution to its end (bounded: 30 s), its finding.
std::optional<HangFinding> Attribution(const HangProbeOptions& o) {
  HangProbe p(o);
  if (!p.Start()) return std::nullopt;
  for (int i = 0; i < 3000 && p.Running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return p.Take();
}

HangProbeOptions ProbeOf(const FakeRas& ras) {
  HangProbeOptions o;
  o.query = ras.Query();
  o.interval_s = 0.1;
  o.node_of = NodeOf;
  return o;
}

TEST(HangProbe, NamesTheDeadProcessesNode) {
  FakeRas ras(FixturePath("dead_2.29.txt"), "normal");
  auto f = Attribution(ProbeOf(ras));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cause, HangCause::kDead);
  EXPECT_EQ(f->nodes, std::vector<std::string>{"n2"});
}

TEST(HangProbe, MismatchOverPollsThenKillSwitchAndOldNccl) {
  FakeRas ras(FixturePath("mismatch_2.29.txt"), "normal");
  HangProbeOptions o = ProbeOf(ras);
  o.polls = 3;
  auto f = Attribution(o);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->cause, HangCause::kBehind);
  EXPECT_EQ(f->nodes, std::vector<std::string>{"n3"});
  o.enabled = false;
  HangProbe off(o);
  EXPECT_FALSE(off.Start());
  EXPECT_NE(off.Take()->line.find("run_ras = no"), std::string::npos);
  o.enabled = true;
  o.nccl_version = "2.26.2";
  HangProbe old(o);
  EXPECT_FALSE(old.Start());
  EXPECT_NE(old.Take()->line.find("older than run_ras_min_nccl 2.27.3"), std::string::npos);
}

TEST(HangProbe, UnreachableRasNamesNoOne) {
  HangProbeOptions o;
  o.query.ep.host = "127.0.0.1";
  o.query.ep.port = 1;
  o.query.check_owner = false;
  o.query.connect_s = 1;
  o.node_of = NodeOf;
  auto f = Attribution(o);
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->nodes.empty());
  EXPECT_NE(f->line.find("NCCL RAS not reached"), std::string::npos) << f->line;
}

TEST(Supervisor, AStallRestartWaitsForTheHangAttribution) {
  SuperviseOptions o;
  o.argv = {"sh", "-c", "echo start; exec sleep 60"};
  o.stall.output_s = 0.3;
  o.kill_on_stall = true;
  o.kill_wait_s = 1;
  int asked = 0;
  o.kill_held = [&] {
    ++asked;
    return asked < 4;  // held for the first three looks, as while RAS is asked
  };
  auto r = RunSupervised(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->killed_for_alert);
  EXPECT_GE(asked, 4);
  EXPECT_NE(r->exit.exit_code, 0);
}

}  // namespace
}  // namespace preflight
