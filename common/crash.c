/* A fatal signal's report: the rank, the signal, the thread, and for the
 * instruction, the fault address, the caller and each frame the mapping it
 * lies in (file and offset, for addr2line). Then the default action: the
 * exit status, and a core where the limit allows one, are the signal's.
 *
 * The handler is async-signal-safe: it formats by hand, reads
 * /proc/self/maps with read(2) and writes with write(2). It does not call
 * dladdr (a crash inside dlopen/dlclose holds the loader's lock). The one
 * call that may allocate, backtrace(), is warmed when the handler is
 * installed. Only signals at their default action, or at UCX's report, are
 * taken (a program's own handler stays). */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "common/common_internal.h"
#include "common/env.h"

#define CRASH_FRAMES 32

static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* The first thread to crash reports; any other one waits for the default
 * action. A signal handler gets no context argument, so this flag is the
 * process's. */
static atomic_int crash_busy;

typedef struct out_buf {
  char b[8192];
  size_t n;
} out_buf;

static void put(out_buf *o, const char *s) {
  while (*s && o->n < sizeof o->b - 1) o->b[o->n++] = *s++;
}

static void put_hex(out_buf *o, uintptr_t v) {
  char t[2 + 2 * sizeof v + 1];
  int i = (int)sizeof t - 1;
  t[i] = '\0';
  do {
    t[--i] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v && i > 2);
  t[--i] = 'x';
  t[--i] = '0';
  put(o, t + i);
}

static void put_dec(out_buf *o, long v) {
  char t[24];
  int i = (int)sizeof t - 1, neg = v < 0;
  unsigned long u = neg ? 0ul - (unsigned long)v : (unsigned long)v;
  t[i] = '\0';
  do {
    t[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (neg) t[--i] = '-';
  put(o, t + i);
}

static void flush_line(out_buf *o) {
  put(o, "\n");
  size_t off = 0;
  while (off < o->n) {
    ssize_t w = write(STDERR_FILENO, o->b + off, o->n - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  o->n = 0;
}

/* "[rank N] hsr fatal: ", as log.c prefixes its lines */
static void prefix(out_buf *o) {
  const char *rank = getenv("PMIX_RANK");
  put(o, "[rank ");
  put(o, rank && *rank ? rank : "0");
  put(o, "] hsr fatal: ");
}

/* Where an address lies: its mapping's start, file offset, permissions and path. */
typedef struct where {
  uintptr_t addr, start, off;
  char perms[5];
  char path[160];
  int found;
} where;

static uintptr_t parse_hex(const char **p) {
  uintptr_t v = 0;
  for (;; (*p)++) {
    char c = **p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v * 16 + (uintptr_t)d;
  }
}

/* One line of /proc/self/maps against every address still unplaced. */
static void maps_line(const char *l, where *w, int n) {
  const char *p = l;
  uintptr_t lo = parse_hex(&p);
  if (*p++ != '-') return;
  uintptr_t hi = parse_hex(&p);
  if (*p++ != ' ') return;
  char perms[5] = {0};
  for (int i = 0; i < 4 && *p; i++) perms[i] = *p++;
  if (*p++ != ' ') return;
  uintptr_t off = parse_hex(&p);
  for (int f = 0; f < 2; f++) { /* dev, inode */
    while (*p == ' ') p++;
    while (*p && *p != ' ') p++;
  }
  while (*p == ' ') p++;
  for (int i = 0; i < n; i++) {
    if (w[i].found || w[i].addr < lo || w[i].addr >= hi) continue;
    w[i].found = 1, w[i].start = lo, w[i].off = off;
    memcpy(w[i].perms, perms, sizeof perms);
    size_t k = 0;
    for (; p[k] && k < sizeof w[i].path - 1; k++) w[i].path[k] = p[k];
    w[i].path[k] = '\0';
  }
}

static void place(where *w, int n) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096], line[512];
  size_t ln = 0;
  ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < r; i++) {
      if (buf[i] != '\n') {
        if (ln < sizeof line - 1) line[ln++] = buf[i];
        continue;
      }
      line[ln] = '\0';
      maps_line(line, w, n);
      ln = 0;
    }
  close(fd);
}

static void put_where(out_buf *o, const where *w) {
  put_hex(o, w->addr);
  if (!w->found) {
    put(o, " (in no mapping)");
    return;
  }
  put(o, " (");
  put(o, w->path[0] ? w->path : "[anonymous]");
  if (w->path[0] == '/') {
    put(o, "+");
    put_hex(o, w->addr - w->start + w->off);
  }
  put(o, ", ");
  put(o, w->perms);
  put(o, ")");
}

static const char *sig_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGILL: return "SIGILL";
  case SIGFPE: return "SIGFPE";
  case SIGABRT: return "SIGABRT";
  default: return "a signal";
  }
}

static const char *code_name(int sig, int code) {
  if (code == SI_USER || code == SI_TKILL) return "sent by a process";
  if (sig == SIGSEGV) return code == SEGV_MAPERR ? "no mapping at the address" : "no permission for the access";
  if (sig == SIGBUS) return code == BUS_ADRERR ? "no backing for the address (a file or shared memory cut short?)" : "bus error";
  return "";
}

static void on_crash(int sig, siginfo_t *si, void *uc_) {
  int e = errno;
  ucontext_t *uc = uc_;
  if (atomic_exchange(&crash_busy, 1)) { /* another thread reports */
    struct timespec ts = {.tv_sec = 2};
    nanosleep(&ts, NULL);
  } else {
    out_buf o = {.n = 0};
    char comm[32] = "?";
    int fd = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t r = read(fd, comm, sizeof comm - 1);
      comm[r > 0 ? r : 0] = '\0';
      if (r > 0 && comm[r - 1] == '\n') comm[r - 1] = '\0';
      close(fd);
    }
    where w[4 + CRASH_FRAMES]; /* ip, fault address, caller, sp, the frames */
    memset(w, 0, sizeof w);
    uintptr_t ip = 0, sp = 0;
#if defined(__x86_64__)
    ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    ip = (uintptr_t)uc->uc_mcontext.pc, sp = (uintptr_t)uc->uc_mcontext.sp;
#else
    (void)uc;
#endif
    w[0].addr = ip, w[1].addr = (uintptr_t)si->si_addr, w[3].addr = sp;
    void *fr[CRASH_FRAMES];
    int nf = backtrace(fr, CRASH_FRAMES), skip = 0;
    for (int i = 0; i < nf && !skip; i++) /* the handler's own frames and the signal's trampoline */
      if ((uintptr_t)fr[i] == ip) skip = i;
    nf -= skip;
    for (int i = 0; i < nf; i++) w[4 + i].addr = (uintptr_t)fr[skip + i];
    place(w, 4 + nf);
    /* not code at the ip: a call through a bad pointer; on x86-64 the
     * caller's return address is the word at sp (the call pushed it) */
    int jumped = w[0].found ? w[0].perms[2] != 'x' : 1;
#if defined(__x86_64__)
    if (jumped && sp && w[3].found && w[3].perms[0] == 'r') {
      w[2].addr = *(const uintptr_t *)sp;
      place(&w[2], 1);
    }
#endif
    prefix(&o);
    put(&o, sig_name(sig));
    const char *cn = code_name(sig, si->si_code);
    if (*cn) {
      put(&o, " (");
      put(&o, cn);
      put(&o, ")");
    }
    put(&o, " in thread '");
    put(&o, comm);
    put(&o, "' (tid ");
    put_dec(&o, (long)syscall(SYS_gettid));
    put(&o, ", pid ");
    put_dec(&o, (long)getpid());
    put(&o, ")");
    flush_line(&o);
    if (ip) {
      prefix(&o);
      put(&o, "  at ");
      put_where(&o, &w[0]);
      if (jumped) put(&o, ": not code, the thread jumped there through a bad pointer");
      flush_line(&o);
    }
    if ((sig == SIGSEGV || sig == SIGBUS) && w[1].addr != ip) {
      prefix(&o);
      put(&o, "  fault address ");
      put_where(&o, &w[1]);
      flush_line(&o);
    }
    if (w[2].addr) {
      prefix(&o);
      put(&o, "  called from ");
      put_where(&o, &w[2]);
      flush_line(&o);
    }
    for (int i = 0; i < nf; i++) {
      prefix(&o);
      put(&o, "  #");
      put_dec(&o, i);
      put(&o, " ");
      put_where(&o, &w[4 + i]);
      flush_line(&o);
    }
    prefix(&o);
    put(&o, "  (a FILE+OFFSET above is named by: addr2line -f -e FILE OFFSET)");
    flush_line(&o);
  }
  /* the default action, with the signal's exit status and core */
  signal(sig, SIG_DFL);
  if (si->si_code == SI_USER || si->si_code == SI_TKILL || sig == SIGABRT) raise(sig);
  errno = e; /* a fault re-executes the instruction and ends the process */
}

/* UCX installs its own report when libucs loads (UCX_HANDLE_ERRORS=bt): it
 * does not name the rank, so hsr's replaces it, unless the user chose UCX's
 * behaviour (UCX_HANDLE_ERRORS set: freeze, debug). */
static int from_ucx(const struct sigaction *a) {
  if (!(a->sa_flags & SA_SIGINFO) || getenv("UCX_HANDLE_ERRORS")) return 0;
  Dl_info d;
  return dladdr((void *)(uintptr_t)a->sa_sigaction, &d) && d.dli_fname && strstr(d.dli_fname, "libucs");
}

void crash_report_install(void) {
  int on = 1;
  if (env_get_bool("HSR_CRASH_REPORT", &on) != HSR_OK || !on) return;
  void *warm[2];
  (void)backtrace(warm, 2); /* loads the unwinder now, not in the handler */
  for (size_t i = 0; i < sizeof crash_sigs / sizeof crash_sigs[0]; i++) {
    struct sigaction old, sa;
    if (sigaction(crash_sigs[i], NULL, &old) != 0 || !(old.sa_handler == SIG_DFL || from_ucx(&old))) continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    sigaction(crash_sigs[i], &sa, NULL);
  }
}
