/* A fake NVML for tests: implements, with the exact C ABI of
 * checks/include/preflight/nvml_abi.h, the NVML functions preflight's GPU
 * checks call. Built as libnvidia-ml.so.1 and loaded by production code
 * through the same dlopen path as the real library (config key
 * nvml_library). It emulates a healthy 8-GPU H100 node unless faults say
 * otherwise.
 *
 * Faults are read at nvmlInit_v2 from the file named by
 * PREFLIGHT_FAKE_NVML_FAULTS (preflight exports its nvml_fault_file key
 * there), and from PREFLIGHT_FAKE_NVML (the same lines, ';'-separated).
 * One fault a line, '#' comments, GPU = NVML index or '*' for all:
 *   gpus N                      number of GPUs (default 8)
 *   init_error CODE             nvmlInit_v2 returns CODE (e.g. 9: driver not loaded)
 *   gone GPU                    GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)
 *   ecc_volatile GPU N          uncorrected volatile ECC count
 *   ecc_aggregate GPU N         uncorrected aggregate ECC count
 *   ecc_unsupported GPU         ECC counters not supported (ECC off)
 *   retired_pages GPU N         retired pages (double-bit cause)
 *   pending_retirement GPU      a page retirement is pending
 *   remap_failure GPU           row remapping failed
 *   remap_pending GPU           row remap pending (needs reset)
 *   temp GPU C                  temperature
 *   throttle GPU MASK           clock throttle reasons (hex or decimal)
 *   sm_clock GPU MHZ            nvmlDeviceGetClockInfo(NVML_CLOCK_SM) (default 1980)
 *   pcie_width GPU W            current link width (max 16)
 *   pcie_gen GPU G              current and max link generation (default 5)
 *   nvlink_down GPU LINK        that NVLink is inactive (18 links)
 *   no_nvlink GPU               NVLink not supported (PCIe card)
 *   persistence GPU on|off
 *   compute_mode GPU N          nvmlComputeMode_t value
 *   util GPU PCT                GPU utilisation in percent (default 100: busy)
 *   power GPU W                 board power draw in watts (default 500)
 *   power_limit GPU W           enforced power limit in watts (default 700)
 *   mem_used GPU MIB            memory used (default 40000 of 81559 MiB)
 *   driver VERSION              nvmlSystemGetDriverVersion (default 550.00.fake)
 *   vbios GPU VERSION           nvmlDeviceGetVbiosVersion (default 96.00.74.00.11)
 *   inforom GPU VERSION         nvmlDeviceGetInforomImageVersion (default G520.0200.00.05)
 *   hang CALL [GPU]             CALL (e.g. nvmlDeviceGetTemperature) never returns
 *   crash CALL [GPU]            CALL raises SIGSEGV
 * Xid events are not faked here: preflight reads them from the kernel log
 * (/dev/kmsg under fsroot), so tests inject them into the fixture's kmsg.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preflight/nvml_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXG 64

struct nvmlDevice_st {
  int index, gone, ecc_unsupported, pending, remap_fail, remap_pending, no_nvlink, persistence, compute;
  unsigned long long ecc_vol, ecc_agg, throttle;
  unsigned retired, temp, width, gen, nvlink_down_mask;
  unsigned util, sm_mhz;
  unsigned power_w, power_limit_w, mem_used_mib;
  char vbios[32];
  char inforom[32];
};

static struct nvmlDevice_st g_dev[MAXG];
static unsigned g_count = 8;
static int g_init_error = 0;
static char g_hang[16][64];
static int g_hang_gpu[16];
static int g_nhang;
static char g_crash[16][64];
static int g_crash_gpu[16];
static int g_ncrash;
static char g_driver[64];

static void reset(void) {
  g_count = 8;
  g_init_error = 0;
  g_nhang = g_ncrash = 0;
  snprintf(g_driver, sizeof g_driver, "%s", "550.00.fake");
  for (int i = 0; i < MAXG; ++i) {
    memset(&g_dev[i], 0, sizeof g_dev[i]);
    g_dev[i].index = i;
    g_dev[i].temp = 38;
    g_dev[i].util = 100;
    g_dev[i].sm_mhz = 1980;
    g_dev[i].power_w = 500;
    g_dev[i].power_limit_w = 700;
    g_dev[i].mem_used_mib = 40000;
    g_dev[i].width = 16;
    g_dev[i].gen = 5;
    g_dev[i].persistence = 1;
    snprintf(g_dev[i].vbios, sizeof g_dev[i].vbios, "%s", "96.00.74.00.11");
    snprintf(g_dev[i].inforom, sizeof g_dev[i].inforom, "%s", "G520.0200.00.05");
  }
}

static void apply_gpu(const char* g, void (*fn)(struct nvmlDevice_st*, const char*), const char* arg) {
  if (strcmp(g, "*") == 0) {
    for (int i = 0; i < MAXG; ++i) fn(&g_dev[i], arg);
  } else {
    int i = atoi(g);
    if (i >= 0 && i < MAXG) fn(&g_dev[i], arg);
  }
}

#define SETTER(name, stmt) \
  static void name(struct nvmlDevice_st* d, const char* a) { (void)a; stmt; }
SETTER(f_gone, d->gone = 1)
SETTER(f_eccv, d->ecc_vol = strtoull(a, 0, 0))
SETTER(f_ecca, d->ecc_agg = strtoull(a, 0, 0))
SETTER(f_eccu, d->ecc_unsupported = 1)
SETTER(f_ret, d->retired = (unsigned)strtoul(a, 0, 0))
SETTER(f_pend, d->pending = 1)
SETTER(f_rfail, d->remap_fail = 1)
SETTER(f_rpend, d->remap_pending = 1)
SETTER(f_temp, d->temp = (unsigned)strtoul(a, 0, 0))
SETTER(f_util, d->util = (unsigned)strtoul(a, 0, 0))
SETTER(f_power, d->power_w = (unsigned)strtoul(a, 0, 0))
SETTER(f_power_limit, d->power_limit_w = (unsigned)strtoul(a, 0, 0))
SETTER(f_mem_used, d->mem_used_mib = (unsigned)strtoul(a, 0, 0))
SETTER(f_thr, d->throttle = strtoull(a, 0, 0))
SETTER(f_smclk, d->sm_mhz = (unsigned)strtoul(a, 0, 0))
SETTER(f_width, d->width = (unsigned)strtoul(a, 0, 0))
SETTER(f_gen, d->gen = (unsigned)strtoul(a, 0, 0))
SETTER(f_nvl, d->nvlink_down_mask |= 1u << (strtoul(a, 0, 0) % 32))
SETTER(f_nonvl, d->no_nvlink = 1)
SETTER(f_pers, d->persistence = strcmp(a, "on") == 0)
SETTER(f_cm, d->compute = atoi(a))
SETTER(f_vbios, snprintf(d->vbios, sizeof d->vbios, "%s", a))
SETTER(f_inforom, snprintf(d->inforom, sizeof d->inforom, "%s", a))

static void parse_line(char* line) {
  char* hash = strchr(line, '#');
  if (hash) *hash = 0;
  char k[64] = "", g[64] = "", v[64] = "";
  int n = sscanf(line, "%63s %63s %63s", k, g, v);
  if (n < 1) return;
  static const struct { const char* key; void (*fn)(struct nvmlDevice_st*, const char*); } kTable[] = {
      {"gone", f_gone}, {"ecc_volatile", f_eccv}, {"ecc_aggregate", f_ecca}, {"ecc_unsupported", f_eccu},
      {"retired_pages", f_ret}, {"pending_retirement", f_pend}, {"remap_failure", f_rfail},
      {"remap_pending", f_rpend}, {"temp", f_temp}, {"throttle", f_thr}, {"sm_clock", f_smclk}, {"pcie_width", f_width},
      {"pcie_gen", f_gen}, {"nvlink_down", f_nvl}, {"no_nvlink", f_nonvl}, {"persistence", f_pers},
      {"compute_mode", f_cm}, {"util", f_util}, {"power", f_power}, {"power_limit", f_power_limit}, {"mem_used", f_mem_used}, {"vbios", f_vbios}, {"inforom", f_inforom}};
  if (strcmp(k, "driver") == 0 && n >= 2) { snprintf(g_driver, sizeof g_driver, "%s", g); return; }
  if (strcmp(k, "gpus") == 0 && n >= 2) { g_count = (unsigned)atoi(g) > MAXG ? MAXG : (unsigned)atoi(g); return; }
  if (strcmp(k, "init_error") == 0 && n >= 2) { g_init_error = atoi(g); return; }
  if ((strcmp(k, "hang") == 0 || strcmp(k, "crash") == 0) && n >= 2) {
    int crash = k[0] == 'c';
    int* cnt = crash ? &g_ncrash : &g_nhang;
    if (*cnt >= 16) return;
    snprintf(crash ? g_crash[*cnt] : g_hang[*cnt], 64, "%s", g);
    (crash ? g_crash_gpu : g_hang_gpu)[*cnt] = (n >= 3 && strcmp(v, "*") != 0) ? atoi(v) : -1;
    ++*cnt;
    return;
  }
  for (size_t i = 0; i < sizeof kTable / sizeof kTable[0]; ++i)
    if (strcmp(k, kTable[i].key) == 0 && n >= 2) apply_gpu(g, kTable[i].fn, v);
}

static void load_faults(void) {
  reset();
  const char* path = getenv("PREFLIGHT_FAKE_NVML_FAULTS");
  if (path && *path) {
    FILE* f = fopen(path, "r");
    if (f) {
      char line[256];
      while (fgets(line, sizeof line, f)) parse_line(line);
      fclose(f);
    }
  }
  const char* inl = getenv("PREFLIGHT_FAKE_NVML");
  if (inl && *inl) {
    char* copy = strdup(inl);
    for (char* save = 0, *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(0, ";", &save)) parse_line(tok);
    free(copy);
  }
}

/* A configured hang sleeps forever; a crash raises SIGSEGV. */
static void maybe_fault(const char* call, int gpu) {
  for (int i = 0; i < g_ncrash; ++i)
    if (strcmp(g_crash[i], call) == 0 && (g_crash_gpu[i] < 0 || g_crash_gpu[i] == gpu)) raise(SIGSEGV);
  for (int i = 0; i < g_nhang; ++i)
    if (strcmp(g_hang[i], call) == 0 && (g_hang_gpu[i] < 0 || g_hang_gpu[i] == gpu))
      for (;;) pause();
}

static int g_inited;
#define DEV_GUARD(call)                                   \
  if (!g_inited) return NVML_ERROR_UNINITIALIZED;         \
  if (device == NULL) return NVML_ERROR_INVALID_ARGUMENT; \
  maybe_fault(call, device->index);                       \
  if (device->gone) return NVML_ERROR_GPU_IS_LOST;

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  load_faults();
  maybe_fault("nvmlInit_v2", -1);
  if (g_init_error) return (nvmlReturn_t)g_init_error;
  g_inited = 1;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlShutdown(void) {
  g_inited = 0;
  return NVML_SUCCESS;
}
EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned int len) {
  if (!g_inited) return NVML_ERROR_UNINITIALIZED;
  snprintf(v, len, "%s", g_driver);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  if (!g_inited) return NVML_ERROR_UNINITIALIZED;
  maybe_fault("nvmlDeviceGetCount_v2", -1);
  *n = g_count;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (!g_inited) return NVML_ERROR_UNINITIALIZED;
  if (i >= g_count) return NVML_ERROR_INVALID_ARGUMENT;
  maybe_fault("nvmlDeviceGetHandleByIndex_v2", (int)i);
  if (g_dev[i].gone) return NVML_ERROR_GPU_IS_LOST;
  *d = &g_dev[i];
  return NVML_SUCCESS;
}
/* The PCI buses of a DGX H100's eight GPUs. */
static const unsigned kBus[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* p) {
  DEV_GUARD("nvmlDeviceGetPciInfo_v3");
  memset(p, 0, sizeof *p);
  p->bus = device->index < 8 ? kBus[device->index] : (unsigned)(0xe0 + device->index);
  snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
  snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", p->bus);
  p->pciDeviceId = 0x233010de;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* m) {
  DEV_GUARD("nvmlDeviceGetMinorNumber");
  *m = (unsigned)device->index;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int len) {
  DEV_GUARD("nvmlDeviceGetName");
  snprintf(name, len, "%s", "NVIDIA H100 80GB HBM3 (fake)");
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* v, unsigned int len) {
  DEV_GUARD("nvmlDeviceGetVbiosVersion");
  snprintf(v, len, "%s", device->vbios);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char* v, unsigned int len) {
  DEV_GUARD("nvmlDeviceGetInforomImageVersion");
  snprintf(v, len, "%s", device->inforom);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t t,
                                                nvmlEccCounterType_t c, unsigned long long* n) {
  DEV_GUARD("nvmlDeviceGetTotalEccErrors");
  if (device->ecc_unsupported) return NVML_ERROR_NOT_SUPPORTED;
  *n = t == NVML_MEMORY_ERROR_TYPE_CORRECTED ? 0 : (c == NVML_VOLATILE_ECC ? device->ecc_vol : device->ecc_agg);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                              unsigned int* count, unsigned long long* addrs) {
  DEV_GUARD("nvmlDeviceGetRetiredPages");
  unsigned have = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? device->retired : 0;
  unsigned room = *count;
  *count = have;
  if (room < have) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (unsigned i = 0; addrs && i < have; ++i) addrs[i] = 0x1000ull * (i + 1);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t* p) {
  DEV_GUARD("nvmlDeviceGetRetiredPagesPendingStatus");
  *p = device->pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corr, unsigned int* unc,
                                              unsigned int* pending, unsigned int* failure) {
  DEV_GUARD("nvmlDeviceGetRemappedRows");
  *corr = 0;
  *unc = device->remap_fail || device->remap_pending ? 1 : 0;
  *pending = (unsigned)device->remap_pending;
  *failure = (unsigned)device->remap_fail;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t s, unsigned int* t) {
  DEV_GUARD("nvmlDeviceGetTemperature");
  if (s != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *t = device->temp;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* r) {
  DEV_GUARD("nvmlDeviceGetCurrentClocksThrottleReasons");
  *r = device->throttle ? device->throttle : nvmlClocksThrottleReasonGpuIdle;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  DEV_GUARD("nvmlDeviceGetClockInfo");
  if (type != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
  *mhz = device->sm_mhz;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* g) {
  DEV_GUARD("nvmlDeviceGetCurrPcieLinkGeneration");
  *g = device->gen;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* w) {
  DEV_GUARD("nvmlDeviceGetCurrPcieLinkWidth");
  *w = device->width;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* g) {
  DEV_GUARD("nvmlDeviceGetMaxPcieLinkGeneration");
  *g = device->gen;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* w) {
  DEV_GUARD("nvmlDeviceGetMaxPcieLinkWidth");
  *w = 16;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t* a) {
  DEV_GUARD("nvmlDeviceGetNvLinkState");
  if (device->no_nvlink) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  *a = (device->nvlink_down_mask >> link) & 1u ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* m) {
  DEV_GUARD("nvmlDeviceGetPersistenceMode");
  *m = device->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* m) {
  DEV_GUARD("nvmlDeviceGetComputeMode");
  *m = (nvmlComputeMode_t)device->compute;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  DEV_GUARD("nvmlDeviceGetUtilizationRates");
  u->gpu = device->util;
  u->memory = device->util;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* mw) {
  DEV_GUARD("nvmlDeviceGetPowerUsage");
  *mw = device->power_w * 1000u;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* mw) {
  DEV_GUARD("nvmlDeviceGetEnforcedPowerLimit");
  *mw = device->power_limit_w * 1000u;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  DEV_GUARD("nvmlDeviceGetMemoryInfo");
  m->total = 81559ull << 20;
  m->used = (unsigned long long)device->mem_used_mib << 20;
  m->free = m->total > m->used ? m->total - m->used : 0;
  return NVML_SUCCESS;
}
