// What `preflight topo` and the plugin show of a topology (see topo.h): the
// GPU-NIC table, the env plan as text, and the JSON record.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "preflight/json.h"
#include "preflight/strings.h"
#include "preflight/topo.h"

namespace preflight {

std::string TopologyTable(const Topology& topo, const std::vector<GpuPairing>& pairing) {
  std::ostringstream o;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-8s", "");
  o << buf;
  for (const auto& n : topo.nics) {
    std::snprintf(buf, sizeof buf, "%-12s", n.name.c_str());
    o << buf;
  }
  o << "NUMA  NIC(s)\n";
  for (const auto& g : topo.gpus) {
    std::snprintf(buf, sizeof buf, "GPU%-5d", g.index);
    o << buf;
    for (const auto& n : topo.nics) {
      std::snprintf(buf, sizeof buf, "%-12s", PathClassName(Distance(g, n).cls));
      o << buf;
    }
    std::string paired = "-";
    for (const auto& p : pairing)
      if (p.gpu == g.index && !p.nics.empty()) paired = Join(p.nics, ",") + " (" + PathClassName(p.cls) + ")";
    std::snprintf(buf, sizeof buf, "%-6s", g.numa >= 0 ? std::to_string(g.numa).c_str() : "-");
    o << buf << paired << "\n";
  }
  o << "\nGPUs:\n";
  for (const auto& g : topo.gpus)
    o << "  GPU" << g.index << "  " << g.vendor << "  " << g.busid << "  " << (g.osdev.empty() ? "-" : g.osdev) << "  NUMA "
      << g.numa << "  package " << g.package << "\n";
  if (topo.gpus.empty()) o << "  (no NVIDIA or AMD GPU found)\n";
  o << "NICs:\n";
  for (const auto& n : topo.nics) {
    o << "  " << n.name << "  " << n.kind << "  " << n.busid << "  NUMA " << n.numa << "  netdev "
      << (n.netdevs.empty() ? "-" : Join(n.netdevs, ",")) << "  " << n.role_name()
      << (n.role_why.empty() ? "" : " (" + n.role_why + ")") << "\n";
    if (n.ports.empty()) o << "    no port records: state unknown (counted usable)\n";
    for (const auto& p : n.ports)
      o << "    port " << p.num << "  " << (p.state.empty() ? "state unknown" : p.state) << "  "
        << (p.link_layer.empty() ? "-" : p.link_layer) << "  " << (p.rate.empty() ? "-" : p.rate)
        << (p.gid_index >= 0 ? "  RoCE v2 GID " + std::to_string(p.gid_index) : "") << "\n";
  }
  if (topo.nics.empty()) o << "  (no RDMA NIC found)\n";
  return o.str();
}

std::string EnvPlanText(const EnvPlan& plan) {
  std::ostringstream o;
  for (const auto& v : plan.vars) o << "  set   " << v.name << "=" << v.value << "\n";
  for (const auto& u : plan.unset) o << "  not set " << u.first << "  (" << u.second << ")\n";
  return o.str();
}

std::string TopologyJson(const Topology& topo, const std::vector<GpuPairing>& pairing, const EnvPlan* plan,
                         const std::vector<std::string>& warnings) {
  JsonWriter w;
  w.BeginObject();
  w.Field("source", topo.source);
  w.Field("state_from", topo.state_from);
  if (!warnings.empty()) {
    w.Key("warnings").BeginArray();
    for (const auto& m : warnings) w.String(m);
    w.EndArray();
  }
  w.Key("gpus").BeginArray();
  for (const auto& g : topo.gpus) {
    w.BeginObject().Field("index", g.index).Field("vendor", g.vendor).Field("busid", g.busid).Field("osdev", g.osdev);
    w.Field("numa", g.numa).Field("package", g.package);
    w.Key("nics").BeginArray();
    for (const auto& p : pairing)
      if (p.gpu == g.index)
        for (const auto& n : p.nics) w.String(n);
    w.EndArray();
    w.Key("distance").BeginObject();
    for (const auto& n : topo.nics) w.Field(n.name, PathClassName(Distance(g, n).cls));
    w.EndObject().EndObject();
  }
  w.EndArray();
  w.Key("nics").BeginArray();
  for (const auto& n : topo.nics) {
    w.BeginObject().Field("name", n.name).Field("kind", n.kind).Field("busid", n.busid).Field("numa", n.numa);
    w.Field("state", n.state()).Field("role", n.role_name()).Field("role_why", n.role_why);
    w.Key("netdevs").BeginArray();
    for (const auto& d : n.netdevs) w.String(d);
    w.EndArray();
    w.Key("ports").BeginArray();
    for (const auto& p : n.ports) {
      w.BeginObject().Field("port", p.num).Field("state", p.state).Field("link_layer", p.link_layer);
      w.Field("rate", p.rate).Field("gid_index", p.gid_index).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray();
  if (plan != nullptr) {
    w.Key("env").BeginObject();
    w.Key("gpus").BeginArray();
    for (int g : plan->gpus) w.Int(g);
    w.EndArray();
    w.Key("set").BeginObject();
    for (const auto& v : plan->vars) w.Field(v.name, v.value);
    w.EndObject();
    w.Key("unset").BeginObject();
    for (const auto& u : plan->unset) w.Field(u.first, u.second);
    w.EndObject().EndObject();
  }
  w.EndObject();
  return w.str() + "\n";
}

}  // namespace preflight
