/* TEST ONLY: a SPANK plugin that does what pyxis's import of a container
 * image's environment does, for system.container_env, which loads it before
 * and after preflight.so in plugstack.conf. Not installed.
 *
 * pyxis (github.com/NVIDIA/pyxis, Apache-2.0; nothing of its code here)
 * starts the container in its task_init and copies the image's environment
 * over the task's with overwrite. This fake's "image" is a file of
 * KEY=VALUE lines given with --container-image=FILE; its task_init sets each
 * with spank_setenv(..., overwrite=1). Named pyxis (SPANK_PLUGIN) and built
 * as spank_pyxis.so so that options, job-control variables
 * (SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image) and
 * `preflight config check` see what they see with the real one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

static char* image_env = NULL;
static char* keep_env = NULL; /* --container-env: names not imported (",NAME,NAME,") */

static int image_option(int val, const char* optarg, int remote) {
  (void)val;
  (void)remote;
  if (optarg == NULL || optarg[0] == '\0') return -1;
  free(image_env);
  image_env = strdup(optarg);
  return image_env ? 0 : -1;
}

static int env_option(int val, const char* optarg, int remote) {
  (void)val;
  (void)remote;
  if (optarg == NULL) return -1;
  free(keep_env);
  size_t n = strlen(optarg) + 3;
  keep_env = malloc(n);
  if (keep_env == NULL) return -1;
  snprintf(keep_env, n, ",%s,", optarg);
  return 0;
}

static int kept(const char* name) {
  if (keep_env == NULL) return 0;
  char key[4100];
  snprintf(key, sizeof key, ",%s,", name);
  return strstr(keep_env, key) != NULL;
}

struct spank_option spank_options[] = {
    {"container-image", "FILE",
     "TEST ONLY (fake pyxis): import KEY=VALUE lines of FILE over each task's environment in task_init", 1, 0,
     image_option},
    {"container-env", "NAME[,NAME...]",
     "TEST ONLY (fake pyxis): names the image does not override (pyxis: the job's own value wins)", 1, 0, env_option},
    SPANK_OPTIONS_TABLE_END};

int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (image_env == NULL) return 0;
  FILE* f = fopen(image_env, "r");
  if (f == NULL) {
    slurm_error("fake pyxis: cannot open image environment %s", image_env);
    return -1;
  }
  char line[4096];
  while (fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char* eq = strchr(line, '=');
    if (eq == NULL || eq == line) continue;
    *eq = '\0';
    if (!kept(line)) spank_setenv(sp, line, eq + 1, 1);
  }
  fclose(f);
  return 0;
}
