# Fails when a source includes a header of a layer above its own, when a
# lower layer names an upper layer's things, or when HTTP code outside
# HTTP/1's room takes a client connection's events (the transport seam).
#   cmake -DROOT=<source dir> [-DSTAMP=<file to touch on success>] -P check_layers.cmake
# The layers, lowest first: core, {event, codec}, upstream, {http, stream, mail}, server, app.
# codec is the pure HTTP/1 codec room (parsers, chunked, header writer): it
# stands on core alone, so stream, a mail proxy and the upstream core can use it.
# A file under src/<layer>/ may include "<lower or same layer>/..." internal
# headers and "vigil/<core|event>/..." public ones; a public header under
# include/vigil/<layer>/ may include only public headers of its own or a lower
# layer (never src/). http, stream and mail are side by side: none sees the others.
cmake_minimum_required(VERSION 3.25)
set(_allowed_core     core)
set(_allowed_event    core event)
set(_allowed_codec    core codec)
set(_allowed_upstream core event upstream)
set(_allowed_http     core event codec upstream http)
set(_allowed_stream   core event codec upstream stream)
set(_allowed_mail     core event codec upstream mail)
set(_allowed_server   core event codec upstream http stream mail server)
set(_allowed_app      core event codec upstream http stream mail server app)
set(_layers core event codec upstream http stream mail server app)

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

# Names. An include check cannot see a lower layer that lists an upper
# layer's things by name (the core's stats header once declared the HTTP,
# TLS, io_uring and mail counters): a file of core may not name HTTP, TLS/SSL,
# io_uring or mail, and a file of event (where TLS and io_uring live) may not
# name HTTP or mail. A name is such a word at the start of an identifier or a
# string's word (http_requests, VIGIL_HTTP_, HttpCounters, "vigil_tls_...");
# comments may say what they like.
set(_names_core http tls ssl uring mail)
set(_names_event http mail)
foreach(_layer core event)
  set(_words "")  # http -> [Hh][Tt][Tt][Pp]
  set(_humps "")  # http -> Http, HTTP
  foreach(_name ${_names_${_layer}})
    string(TOUPPER ${_name} _up)
    string(SUBSTRING ${_up} 0 1 _first)
    string(SUBSTRING ${_name} 1 -1 _rest)
    string(LENGTH ${_name} _len)
    math(EXPR _last "${_len} - 1")
    set(_ci "")
    foreach(_i RANGE ${_last})
      string(SUBSTRING ${_name} ${_i} 1 _c)
      string(TOUPPER ${_c} _C)
      string(APPEND _ci "[${_C}${_c}]")
    endforeach()
    list(APPEND _words "${_ci}")
    list(APPEND _humps "${_first}${_rest}" "${_up}")
  endforeach()
  list(JOIN _words "|" _words)
  list(JOIN _humps "|" _humps)
  # After a non-letter, or at a camel-case hump (kHttp, IoUring).
  set(_re "(^|[^A-Za-z])(${_words})|[a-z](${_humps})")
  file(GLOB_RECURSE _files ${ROOT}/src/${_layer}/*.cc ${ROOT}/src/${_layer}/*.h
       ${ROOT}/include/vigil/${_layer}/*.h)
  foreach(_f ${_files})
    # Line by line, with what a CMake list would take for syntax neutralised
    # (a macro's trailing backslash, semicolons, brackets).
    file(READ ${_f} _text)
    string(REGEX REPLACE "[][;\\]" " " _text "${_text}")
    string(REPLACE "\n" ";" _lines "${_text}")
    set(_n 0)
    foreach(_line IN LISTS _lines)
      math(EXPR _n "${_n} + 1")
      string(REGEX REPLACE "//.*" "" _code "${_line}")
      if(_code MATCHES "^[ \t]*(/\\*|\\*)")
        continue()  # a block comment
      endif()
      # A word that only looks like a layer's name (the syslog facility
      # "mail") is let through by a comment on its own line that says so.
      if(_line MATCHES "// layer-names-ok: ")
        continue()
      endif()
      if(_code MATCHES "${_re}")
        string(REGEX MATCH "(${_words})$" _word "${CMAKE_MATCH_0}")
        file(RELATIVE_PATH _rel ${ROOT} ${_f})
        string(STRIP "${_code}" _code)
        string(APPEND _errors "  ${_rel}:${_n}: names ${_word} (a layer above ${_layer}): ${_code}\n")
      endif()
    endforeach()
  endforeach()
endforeach()

# The HTTP transport seam. The client connection's event handlers belong to
# the protocol that reads it (src/http/v1/ for HTTP/1, v2/ for HTTP/2): request-level code
# sets the request's own read_event_handler / write_event_handler instead,
# which an HTTP/2 stream can call too. Elsewhere in src/http an event handler
# may be set only on an upstream connection (`u.u->read`, or a Connection
# named `u`).
file(GLOB_RECURSE _files ${ROOT}/src/http/*.cc ${ROOT}/src/http/*.h)
foreach(_f ${_files})
  file(RELATIVE_PATH _rel ${ROOT} ${_f})
  if(_rel MATCHES "^src/http/v[12]/")
    continue()  # the transports: HTTP/1 and HTTP/2
  endif()
  file(STRINGS ${_f} _lines REGEX "handler[ \t]*=[^=]")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "//.*" "" _code "${_line}")
    if(NOT _code MATCHES "(read|write|ev)(->|\\.)handler[ \t]*=")
      continue()
    endif()
    if(_code MATCHES "(^|[^A-Za-z0-9_])u(\\.u)?(->|\\.)(read|write)->handler[ \t]*=")
      continue()  # the upstream connection's
    endif()
    string(STRIP "${_code}" _code)
    string(APPEND _errors "  ${_rel}: sets a client connection's event handler outside src/http/v1 "
                          "(set r.read_event_handler / r.write_event_handler): ${_code}\n")
  endforeach()
endforeach()

if(_errors)
  message(FATAL_ERROR "vigil: layering violations:\n${_errors}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
