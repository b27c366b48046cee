# Hardening and warning flags applied to every preflight target.
add_compile_options(
  -Wall -Wextra -Wno-unused-parameter
  -fstack-protector-strong
  -fno-strict-overflow
  $<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
add_link_options(-Wl,-z,relro -Wl,-z,now -Wl,--as-needed)
