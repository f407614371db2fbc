#pragma once
// The files workers write (the error log, http access logs) when they run as
// another user than the master: the master, still root, creates each one and
// gives it to the worker user before the workers start and again before they
// reopen their logs (USR1), as nginx's ngx_reopen_files does. A worker can
// then open an existing file as itself, even where it could not create one.

namespace vigil {

class Log;
struct Cycle;

// Does nothing unless the master runs as root with a worker user other than
// root. Failures are logged (the worker will report its own open() error).
void prepare_worker_files(const Cycle& cycle, Log& log);

}  // namespace vigil
