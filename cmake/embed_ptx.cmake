# Embed the PTX that nvcc made (IN) as a C array (OUT): the library carries
# its kernels as text and loads them with cuModuleLoadData at run time.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  " body "${body}")
file(WRITE "${OUT}"
  "/* Generated from src/device/kernels.cu by nvcc and cmake/embed_ptx.cmake. */\n"
  "const char stoke__kernels_ptx[] = {\n  ${body}0x00};\n")
