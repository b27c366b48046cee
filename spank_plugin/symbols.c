/* The symbols Slurm's plugin loader looks up by name. SPANK_PLUGIN() must be
 * expanded in C: in C++ a namespace-scope const has internal linkage and
 * plugin_name would never be found (see ../shared STYLE notes). */
#include <slurm/spank.h>

#define PF_EXPORT __attribute__((visibility("default")))
PF_EXPORT extern const char plugin_name[];
PF_EXPORT extern const char plugin_type[];
PF_EXPORT extern const unsigned int plugin_version;
PF_EXPORT extern const unsigned int spank_plugin_version;

SPANK_PLUGIN(preflight, 1)
