# Vector kernels: each file is compiled with exactly the ISA flags it needs, and holds no
# static initialisers (nothing in it may run before the run-time CPU check). Their helpers
# (lanes_avx2.hpp, lanes_avx512.hpp) have internal linkage: an inline function compiled with
# ISA flags must never be merged by the linker with the copy baseline code calls.
set(_k "${CMAKE_CURRENT_LIST_DIR}")
set(MOEQUANT_KERNEL_SOURCES
  ${_k}/dtype_convert_avx2.cpp
  ${_k}/dtype_convert_avx512.cpp
  ${_k}/fp8_dequant_avx2.cpp
  ${_k}/fp8_dequant_avx512.cpp
  ${_k}/exp_avx2.cpp
  ${_k}/exp_avx512.cpp
)
set_source_files_properties(${_k}/dtype_convert_avx2.cpp ${_k}/fp8_dequant_avx2.cpp ${_k}/exp_avx2.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
set_source_files_properties(${_k}/dtype_convert_avx512.cpp ${_k}/fp8_dequant_avx512.cpp ${_k}/exp_avx512.cpp
  PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mf16c")
