# Fails when a source includes a header of a layer above its own.
#   cmake -DROOT=<source dir> [-DSTAMP=<file to touch on success>] -P check_layers.cmake
# The layers, lowest first: core, {event, codec}, upstream, {http, stream}, server, app.
# codec is the pure HTTP/1 codec room (parsers, chunked, header writer): it
# stands on core alone, so stream, a mail proxy and the upstream core can use it.
# A file under src/<layer>/ may include "<lower or same layer>/..." internal
# headers and "vigil/<core|event>/..." public ones; a public header under
# include/vigil/<layer>/ may include only public headers of its own or a lower
# layer (never src/). http and stream are side by side: neither sees the other.
cmake_minimum_required(VERSION 3.25)
set(_allowed_core     core)
set(_allowed_event    core event)
set(_allowed_codec    core codec)
set(_allowed_upstream core event upstream)
set(_allowed_http     core event codec upstream http)
set(_allowed_stream   core event codec upstream stream)
set(_allowed_server   core event codec upstream http stream server)
set(_allowed_app      core event codec upstream http stream server app)
set(_layers core event codec upstream http stream server app)

set(_errors "")
foreach(_layer ${_layers})
  file(GLOB_RECURSE _files ${ROOT}/src/${_layer}/*.cc ${ROOT}/src/${_layer}/*.h)
  foreach(_f ${_files})
    file(STRINGS ${_f} _incs REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(_inc ${_incs})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" _path "${_inc}")
      string(REGEX MATCH "^[^/]+" _top "${_path}")
      if(_top STREQUAL "vigil")
        string(REGEX REPLACE "^vigil/([^/]+)/.*" "\\1" _top "${_path}")
        if(_top STREQUAL "${_path}")  # vigil/vigil.h, vigil/version.h
          set(_top core)
        endif()
      endif()
      if(NOT _top IN_LIST _layers)
        continue()  # a header next to the file, or a system one
      endif()
      if(NOT _top IN_LIST _allowed_${_layer})
        file(RELATIVE_PATH _rel ${ROOT} ${_f})
        string(APPEND _errors "  ${_rel}: includes \"${_path}\" (layer ${_top} is not below ${_layer})\n")
      endif()
    endforeach()
  endforeach()
endforeach()

# Public headers: only public headers, of the same or a lower layer.
file(GLOB_RECURSE _public ${ROOT}/include/vigil/*.h)
foreach(_f ${_public})
  file(RELATIVE_PATH _rel ${ROOT}/include/vigil ${_f})
  string(REGEX MATCH "^[^/]+" _own "${_rel}")
  if(_own MATCHES "\\.h$")
    set(_own event)  # the umbrella headers at the top may name every layer
  endif()
  file(STRINGS ${_f} _incs REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_inc ${_incs})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" _path "${_inc}")
    if(NOT _path MATCHES "^vigil/")
      string(APPEND _errors "  include/vigil/${_rel}: includes \"${_path}\" (public headers include only vigil/...)\n")
      continue()
    endif()
    string(REGEX REPLACE "^vigil/([^/]+)/.*" "\\1" _top "${_path}")
    if(_top STREQUAL "${_path}")
      continue()
    endif()
    if(NOT _top IN_LIST _allowed_${_own})
      string(APPEND _errors "  include/vigil/${_rel}: includes \"${_path}\" (layer ${_top} is not below ${_own})\n")
    endif()
  endforeach()
endforeach()

if(_errors)
  message(FATAL_ERROR "vigil: layering violations:\n${_errors}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
