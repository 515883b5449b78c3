# Included at the end of llama.cpp's project() call when llama-cpp-python compiles from source (make install-llm:
# CMAKE_ARGS=-DCMAKE_PROJECT_llama.cpp_INCLUDE=<this file>). llama-cpp-python forces LLAMA_BUILD_COMMON on, but
# its Python package loads only libllama, libggml* and libmtmd (llama_cpp/lib); llama.cpp's "common" library
# (chat templates, argument parsing, the HTTP client for its own tools) and cpp-httplib are about a third of the
# compile and are installed only as a stray lib/libllama-common.so outside the package. Nothing else changes:
# libllama, libggml* and libmtmd are compiled from the same sources with the same flags.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp: the common library (not loaded by llama-cpp-python)" FORCE)
