# Turns INPUT (a text file) into OUTPUT, a C++ source defining
# vigil::${VAR} (default kEmbeddedConf) as a string_view over the bytes of the file.
if(NOT VAR)
  set(VAR kEmbeddedConf)
endif()
get_filename_component(_name ${INPUT} NAME)
file(READ ${INPUT} _hex HEX)
string(LENGTH "${_hex}" _len)
math(EXPR _n "${_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," _bytes "${_hex}")
file(WRITE ${OUTPUT}
  "// Generated from conf/${_name} by cmake/embed.cmake. Do not edit.\n"
  "#include <string_view>\n"
  "namespace vigil {\n"
  "namespace { constexpr char kBytes[] = {${_bytes} '\\0'}; }\n"
  "extern const std::string_view ${VAR};\n"
  "const std::string_view ${VAR}{kBytes, ${_n}};\n"
  "}  // namespace vigil\n")
