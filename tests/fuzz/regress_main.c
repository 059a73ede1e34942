/* Runs a fuzz target over files (or every file of folders) without libFuzzer:
 * the gcc build's regression test of every crash and hang the fuzzer found
 * (tests/fuzz/regress/<target>/) and of the seed corpus. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "regress: cannot open %s\n", path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
  size_t got = b && n > 0 ? fread(b, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!b || (n > 0 && got != (size_t)n)) {
    free(b);
    fprintf(stderr, "regress: cannot read %s\n", path);
    return 1;
  }
  LLVMFuzzerTestOneInput(b, got);
  free(b);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) continue; /* an empty regress folder is fine */
    if (!S_ISDIR(st.st_mode)) {
      bad += run_file(argv[i]), files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
      if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) bad += run_file(p), files++;
    }
    if (d) closedir(d);
  }
  printf("regress: %d input(s) ran to the end\n", files);
  return bad ? 1 : 0;
}
