#include "preflight/dl_library.h"

#include <dlfcn.h>

namespace preflight {

std::vector<std::string> LibraryNames(const std::string& configured, const std::string& default_name,
                                      const std::vector<std::string>& older) {
  if (configured != default_name) return {configured};
  std::vector<std::string> names{default_name};
  names.insert(names.end(), older.begin(), older.end());
  return names;
}

std::vector<std::string> CudaRuntimeNames(const std::string& configured) {
  return LibraryNames(configured, kCudaRuntimeSoname, {"libcudart.so.12", "libcudart.so.11.0"});
}

Expected<DlLibrary> OpenFirstLibrary(const std::vector<std::string>& names,
                                     const std::function<void(const std::string&)>& before) {
  std::string tried;
  for (const auto& n : names) {
    if (n.empty()) continue;
    if (before) before(n);
    void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) return DlLibrary{h, n};
    const char* e = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(e != nullptr ? e : n + ": cannot load");
  }
  return Status::Unavailable(tried.empty() ? std::string("no library name given") : tried);
}

}  // namespace preflight
