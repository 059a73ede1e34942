/* The MLP's synthetic samples off the critical path: a helper thread makes
 * the next micro-batch while the current one trains (double buffering). The
 * samples are the same bits mlp_data gives; only when they are made moves. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mlp.h"

#define FEED_WAIT_S 600 /* bound on waiting for the helper: it does seconds of work at most */

typedef struct batch {
  float *x;
  int *y;
  int cap;
} batch;

struct mlp_feed {
  mlp_cfg c;
  mlp_gen *gen, *helper_gen; /* one each: the generator's scratch is not shared */
  batch cur, next;
  pthread_t th;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int queued, running, done, quit; /* the next buffer's job */
  int64_t step, first;
  int n;
};

static hsr_status grow(const mlp_cfg *c, batch *b, int n) {
  if (n <= b->cap) return HSR_OK;
  free(b->x), free(b->y);
  b->x = malloc((size_t)n * c->in_dim * sizeof(float) + 4);
  b->y = malloc((size_t)n * sizeof(int) + 4);
  b->cap = b->x && b->y ? n : 0;
  return b->cap ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "model: out of memory");
}

static void *helper(void *arg) {
  mlp_feed *f = arg;
  pthread_mutex_lock(&f->mu);
  for (;;) {
    while (!f->queued && !f->quit) pthread_cond_wait(&f->cv, &f->mu); /* idle until asked (or told to quit) */
    if (f->quit) break;
    f->queued = 0, f->running = 1;
    int64_t step = f->step, first = f->first;
    int n = f->n;
    pthread_mutex_unlock(&f->mu);
    mlp_gen_batch(f->helper_gen, step, first, n, f->next.x, f->next.y);
    pthread_mutex_lock(&f->mu);
    f->running = 0, f->done = 1;
    pthread_cond_broadcast(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

/* Waits (bounded) until the helper has nothing queued or running; mu held. */
static hsr_status wait_idle(mlp_feed *f) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += FEED_WAIT_S;
  while (f->queued || f->running)
    if (pthread_cond_timedwait(&f->cv, &f->mu, &until) == ETIMEDOUT)
      return hsr_error(HSR_ERR_TIMEOUT, "model: the data helper thread did not finish within %d s", FEED_WAIT_S);
  return HSR_OK;
}

void mlp_feed_free(mlp_feed *f) {
  if (!f) return;
  if (f->started) {
    pthread_mutex_lock(&f->mu);
    f->quit = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
  }
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  mlp_gen_free(f->gen), mlp_gen_free(f->helper_gen);
  free(f->cur.x), free(f->cur.y), free(f->next.x), free(f->next.y);
  free(f);
}

hsr_status mlp_feed_create(const mlp_cfg *c, mlp_feed **out) {
  mlp_feed *f = calloc(1, sizeof *f);
  if (!f) return hsr_error(HSR_ERR_NOMEM, "model: out of memory");
  f->c = *c;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  hsr_status st = mlp_gen_create(c, &f->gen);
  if (st == HSR_OK) st = mlp_gen_create(c, &f->helper_gen);
  if (st == HSR_OK && pthread_create(&f->th, NULL, helper, f) != 0)
    st = hsr_error(HSR_ERR_SYSTEM, "model: cannot start the data helper thread");
  f->started = st == HSR_OK;
  if (st != HSR_OK) {
    mlp_feed_free(f);
    return st;
  }
  *out = f;
  return HSR_OK;
}

hsr_status mlp_feed_get(mlp_feed *f, int64_t step, int64_t first, int n, const float **x, const int **y) {
  pthread_mutex_lock(&f->mu);
  int mine = (f->queued || f->running || f->done) && f->step == step && f->first == first && f->n == n;
  hsr_status st = mine ? wait_idle(f) : HSR_OK;
  if (st == HSR_OK && mine) { /* made ahead: take it */
    batch t = f->cur;
    f->cur = f->next, f->next = t;
    f->done = 0;
  }
  pthread_mutex_unlock(&f->mu);
  HSR_CHECK(st);
  if (!mine) { /* not asked for ahead (the first step): make it now */
    HSR_CHECK(grow(&f->c, &f->cur, n));
    mlp_gen_batch(f->gen, step, first, n, f->cur.x, f->cur.y);
  }
  *x = f->cur.x, *y = f->cur.y;
  return HSR_OK;
}

hsr_status mlp_feed_ahead(mlp_feed *f, int64_t step, int64_t first, int n) {
  pthread_mutex_lock(&f->mu);
  hsr_status st = wait_idle(f);
  if (st == HSR_OK) st = grow(&f->c, &f->next, n);
  if (st == HSR_OK) {
    f->step = step, f->first = first, f->n = n;
    f->queued = 1, f->done = 0;
    pthread_cond_signal(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
  return st;
}
