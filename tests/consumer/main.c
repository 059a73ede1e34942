#include <stdio.h>
#include <string.h>

#include "hsr/boot.h"
#include "hsr/common.h"

int main(void) {
  hsr_boot *b = NULL;
  if (hsr_boot_init(&b) != HSR_OK) return 1;
  printf("consumer: rank %d of %d, %s\n", hsr_boot_rank(b), hsr_boot_size(b), hsr_status_str(HSR_ERR_TIMEOUT));
  hsr_boot_finalize(b);
  return strcmp(hsr_status_str(HSR_OK), "HSR_OK") != 0;
}
