# The layer check must reject an upward include, a public header that includes
# an internal one, and accept the real tree.
#   cmake -DSOURCE=<source dir> -DWORK=<scratch dir> -P layers_test.cmake
cmake_minimum_required(VERSION 3.25)
set(_check ${SOURCE}/cmake/check_layers.cmake)

execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${SOURCE} -P ${_check}
                RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the real tree fails the layer check:\n${_err}")
endif()

function(expect_rejected name file line expect)
  set(_root ${WORK}/${name})
  file(REMOVE_RECURSE ${_root})
  file(WRITE ${_root}/${file} "${line}\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${_root} -P ${_check}
                  RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(_rc EQUAL 0)
    message(FATAL_ERROR "${name}: '${line}' in ${file} passed the layer check")
  endif()
  if(NOT _err MATCHES "${expect}")
    message(FATAL_ERROR "${name}: the message does not name the fault:\n${_err}")
  endif()
endfunction()

expect_rejected(core_up src/core/a.cc "#include \"http/conf.h\"" "src/core/a.cc: includes \"http/conf.h\"")
expect_rejected(event_up src/event/b.h "#include \"server/modules.h\"" "layer server is not below event")
expect_rejected(sideways src/stream/c.cc "#include \"http/request.h\"" "layer http is not below stream")
expect_rejected(mail_sideways src/mail/h.cc "#include \"stream/proxy.h\"" "layer stream is not below mail")
expect_rejected(mail_up src/mail/i.cc "#include \"server/modules.h\"" "layer server is not below mail")
expect_rejected(upstream_up src/upstream/d.cc "#include \"stream/proxy.h\"" "layer stream is not below upstream")
expect_rejected(codec_up src/codec/g.cc "#include \"vigil/event/loop.h\"" "layer event is not below codec")
expect_rejected(public_internal include/vigil/event/e.h "#include \"core/shm.h\"" "public headers include only vigil/")
expect_rejected(public_up include/vigil/core/f.h "#include \"vigil/event/loop.h\"" "layer event is not below core")

# A lower layer that names an upper layer's things (as the core's stats
# header once listed the HTTP, TLS, io_uring and mail counters), whatever it
# includes.
expect_rejected(core_names_http include/vigil/core/s.h
                "  TOTAL(requests, \"vigil_http_requests_total\", \"counter\", \"Requests.\") \\"
                "include/vigil/core/s.h:1: names http \\(a layer above core\\)")
expect_rejected(core_names_tls include/vigil/core/t.h "struct TlsCounters;" "names Tls")
expect_rejected(core_names_uring src/core/u.cc "  stats.uring_enters = 0;" "src/core/u.cc:1: names uring")
expect_rejected(core_names_mail src/core/m.h "#define VIGIL_MAIL_TOTALS(TOTAL)" "names MAIL")
expect_rejected(event_names_http include/vigil/event/n.h "void count(HttpCounters& c);"
                "names Http \\(a layer above event\\)")
expect_rejected(event_names_mail src/event/o.cc "  mail_counters()->sessions.add();" "names mail")

# The HTTP transport seam: request-level code does not take the client
# connection's events.
expect_rejected(http_client_handler src/http/upstream/p.cc "  c.read->handler = client_read_handler;"
                "src/http/upstream/p.cc: sets a client connection's event handler outside src/http/v1")
expect_rejected(http_client_handler_ptr src/http/core/q.cc "  r.c->write->handler = write_handler;"
                "sets a client connection's event handler")
expect_rejected(http_event_handler src/http/access/v.cc "  wev.handler = delay_handler;"
                "sets a client connection's event handler")

# And what is allowed passes.
set(_root ${WORK}/allowed)
file(REMOVE_RECURSE ${_root})
file(WRITE ${_root}/src/server/ok.cc "#include \"http/conf.h\"\n#include \"stream/proxy.h\"\n#include <vector>\n")
file(WRITE ${_root}/src/mail/ok.cc "#include \"codec/response_parser.h\"\n#include \"upstream/relay.h\"\n")
# Comments may name any layer; words that merely contain a name do not count;
# event names its own TLS and io_uring.
file(WRITE ${_root}/src/core/ok.cc "// HTTP, TLS, io_uring and mail count in their layers.\nint during = 0;  // http\n/* TLS\n * mail */\n")
file(WRITE ${_root}/include/vigil/event/ok.h "struct TlsCounters;\nint uring_enters = 0;\n")
file(WRITE ${_root}/src/http/ok.cc "#include \"upstream/upstream.h\"\n#include \"vigil/event/loop.h\"\n#include \"local.h\"\n")
# The request's own handlers anywhere, the upstream connection's, and the
# client connection's in HTTP/1's room.
file(WRITE ${_root}/src/http/upstream/ok.cc
     "  r.read_event_handler = block_reading;\n  u.u->read->handler = upstream_handler;\n  u.write->handler = upstream_handler;\n  if (rev.handler == body_event) return;\n")
file(WRITE ${_root}/src/http/v1/ok.cc "  c.read->handler = request_handler;\n  rev.handler = wait_request_handler;\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${_root} -P ${_check} RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "allowed includes were rejected:\n${_err}")
endif()
