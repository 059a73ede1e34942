/* NCCL's topology format (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE) read into node
 * records: real vendor files (Azure, AWS) and files written for the test from
 * NCCL's format; path classes as NCCL computes them, NVSwitch domains, hosts
 * of a fused multi-node dump, bad files. Then the comparison of two readings
 * on files written for it: agreeing, and with planted differences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hsr/topology.h"
#include "topology/topology_internal.h"

static hsr_topo *nccl(const char *file, int host, int *hosts) {
  char path[512];
  snprintf(path, sizeof path, "%s/nccl/%s", HSR_TEST_DATA, file);
  hsr_topo *t = NULL;
  if (topo_load_nccl(path, host, &t, hosts) != HSR_OK) fail_msg("%s: %s", file, hsr_last_error());
  return t;
}

static hsr_topo *hwloc(const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", HSR_TEST_DATA, file);
  hsr_topo *t = NULL;
  if (topo_discover(path, &t) != HSR_OK) fail_msg("%s: %s", file, hsr_last_error());
  return t;
}

static void expect_nics(const hsr_topo *t, int g, const char *want) {
  char got[512] = "";
  size_t u = 0;
  for (int j = 0; j < topo_gpu_num_nics(t, g); j++) {
    const char *name;
    topo_path p;
    assert_int_equal(topo_gpu_nic(t, g, j, &name, &p), HSR_OK);
    u += (size_t)snprintf(got + u, sizeof got - u, "%s%s:%s", j ? " " : "", name, topo_path_str(p));
  }
  assert_string_equal(got, want);
}

static void expect_pick(const hsr_topo *t, int g, const char *name, topo_path path) {
  const char *n;
  topo_path p;
  assert_int_equal(topo_gpu_nic_pick(t, g, &n, &p), HSR_OK);
  assert_string_equal(n, name);
  assert_int_equal(p, path);
}

/* The NCCL view of dgx-h100-like.xml: PHB where hwloc says NODE. */
static void dump_dgx(void **s) {
  (void)s;
  int hosts = 0;
  hsr_topo *t = nccl("dgx-h100-like.xml", 0, &hosts);
  assert_int_equal(hosts, 1);
  assert_string_equal(topo_source(t), "nccl-xml");
  assert_string_equal(topo_host(t), "dgx-h100-like");
  assert_int_equal(topo_num_gpus(t), 8);
  assert_int_equal(topo_num_numa(t), 2);
  assert_string_equal(topo_numa_cpuset(t, 1), "8-15");
  assert_string_equal(topo_gpu_pci(t, 4), "0000:93:00.0");
  assert_int_equal(topo_gpu_numa(t, 4), 1);
  assert_string_equal(topo_gpu_cpuset(t, 4), "8-15");
  assert_string_equal(topo_nvlink_source(t), "nccl");
  assert_string_equal(topo_domain_rule(t), "nvswitch");
  assert_string_equal(topo_nvlink_unit(t), "MB/s");
  assert_true(topo_nvlink_bw(t, 0, 7) == 450000.0); /* 18 links at sm 90, 25000 MB/s each */
  assert_int_equal(topo_num_domains(t), 1);
  expect_nics(t, 5, "mlx5_5:PIX mlx5_4:PHB mlx5_6:PHB mlx5_7:PHB mlx5_0:SYS mlx5_1:SYS mlx5_2:SYS mlx5_3:SYS");
  expect_pick(t, 5, "mlx5_5", HSR_PATH_PIX);
  assert_string_equal(topo_notes(t), "");
  topo_free(t);
}

/* Azure NDv4 (real, MIT): two GPUs and two NICs per switch, no <gpu>
 * elements. NCCL splits the two NICs between the two GPUs. */
static void azure_ndv4(void **s) {
  (void)s;
  hsr_topo *t = nccl("azure-ndv4-topo.xml", 0, NULL);
  assert_int_equal(topo_num_gpus(t), 8);
  assert_int_equal(topo_num_numa(t), 4);
  assert_string_equal(topo_gpu_pci(t, 0), "0001:00:00.0");
  assert_int_equal(topo_gpu_numa(t, 0), 1);
  assert_string_equal(topo_gpu_cpuset(t, 0), "24-47");
  assert_string_equal(topo_domain_rule(t), "unknown"); /* NCCL detects NVLink at run time */
  assert_non_null(strstr(topo_notes(t), "no <gpu> elements"));
  expect_pick(t, 0, "0101:00:00.0", HSR_PATH_PIX);
  expect_pick(t, 1, "0102:00:00.0", HSR_PATH_PIX);
  expect_nics(t, 0,
              "0101:00:00.0:PIX 0102:00:00.0:PIX 0103:00:00.0:SYS 0104:00:00.0:SYS 0107:00:00.0:SYS "
              "0108:00:00.0:SYS 0105:00:00.0:SYS 0106:00:00.0:SYS");
  char sum[128];
  assert_int_equal(topo_summary(t, sum, sizeof sum), HSR_OK);
  assert_string_equal(sum, "8 GPUs, NVLink unknown (one GPU per domain), 8 NICs at PIX");
  topo_free(t);
}

/* Azure NC A100 v4 (real): a <nic> directly under <cpu> (PHB from its CPU,
 * SYS from the others) and nvlink elements that target their own GPU. */
static void azure_ncv4(void **s) {
  (void)s;
  hsr_topo *t = nccl("azure-ncv4-topo.xml", 0, NULL);
  assert_int_equal(topo_num_gpus(t), 4);
  expect_nics(t, 0, "eth0:PHB");
  expect_nics(t, 3, "eth0:SYS");
  assert_string_equal(topo_domain_rule(t), "none");
  assert_int_equal(topo_num_domains(t), 4);
  assert_non_null(strstr(topo_notes(t), "target their own GPU"));
  topo_free(t);
}

/* AWS p4d (real, Apache-2.0): two GPUs share one EFA NIC on each switch. */
static void aws_p4d(void **s) {
  (void)s;
  hsr_topo *t = nccl("aws-p4d-24xl-topo.xml", 0, NULL);
  assert_int_equal(topo_num_gpus(t), 8);
  assert_string_equal(topo_gpu_cpuset(t, 0), "0-23,48-71");
  expect_nics(t, 1, "0000:10:1b.0:PIX 0000:20:1b.0:PHB 0000:90:1b.0:SYS 0000:a0:1b.0:SYS");
  expect_pick(t, 1, "0000:10:1b.0", HSR_PATH_PIX);
  assert_int_equal(topo_num_nics(t), 4);
  topo_free(t);
}

/* NCCL flattens a two-level Broadcom switch (PIX); a PLX pair stays PXB. */
static void bcm_levels(void **s) {
  (void)s;
  hsr_topo *t = nccl("bcm-2level.xml", 0, NULL);
  expect_nics(t, 0, "mlx5_0:PIX mlx5_1:PHB");
  expect_nics(t, 1, "mlx5_1:PXB mlx5_0:PHB");
  assert_string_equal(topo_domain_rule(t), "none"); /* a dump without nvlink elements */
  topo_free(t);
}

/* A dump fused over two hosts (multi-node NVLink): one record per host, the
 * NVSwitch GPUs of both in one domain across the nodes. */
static void fused_hosts(void **s) {
  (void)s;
  int hosts = 0;
  hsr_topo *t = nccl("nvl-2host.xml", 1, &hosts);
  assert_int_equal(hosts, 2);
  assert_string_equal(topo_host(t), "nvl-2host#1");
  assert_string_equal(topo_gpu_pci(t, 0), "0009:12:00.0");
  assert_string_equal(topo_domain_rule(t), "nvswitch+fabric-clique");
  assert_true(topo_nvlink_bw(t, 0, 3) == 900000.0); /* 18 links at sm 100, 50000 MB/s each */
  hsr_cluster *c;
  assert_int_equal(cluster_synthetic(t, 2, 8, &c), HSR_OK);
  assert_int_equal(cluster_num_domains(c), 1);
  assert_int_equal(cluster_domain_size(c), 8);
  cluster_free(c);
  topo_free(t);
  char path[512];
  snprintf(path, sizeof path, "%s/nccl/nvl-2host.xml", HSR_TEST_DATA);
  assert_int_equal(topo_load_nccl(path, 2, &t, NULL), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "host 2 is not in 0..1"));
}

static void write_file(const char *path, const char *data) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(data, f);
  fclose(f);
}

static void bad_files(void **s) {
  (void)s;
  hsr_topo *t = (hsr_topo *)1;
  assert_int_equal(topo_load_nccl("/nonexistent/topo.xml", 0, &t, NULL), HSR_ERR_IO);
  assert_null(t);
  assert_non_null(strstr(hsr_last_error(), "cannot open NCCL topology '/nonexistent/topo.xml'"));
  char dir[] = "/tmp/hsr-nccl-XXXXXX", path[128];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/t.xml", dir);
  write_file(path, "");
  assert_int_equal(topo_load_nccl(path, 0, &t, NULL), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "is empty"));
  write_file(path, "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\">\n</system>\n");
  assert_int_equal(topo_load_nccl(path, 0, &t, NULL), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "not valid XML (line "));
  write_file(path, "<graphs version=\"1\"/>\n");
  assert_int_equal(topo_load_nccl(path, 0, &t, NULL), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "root element <graphs>, expected <system>"));
  write_file(path, "<system version=\"1\"/>\n");
  assert_int_equal(topo_load_nccl(path, 0, &t, NULL), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "no <cpu> element"));
  unlink(path);
  rmdir(dir);
  snprintf(path, sizeof path, "%s/dgx-h100-like.xml", HSR_TEST_DATA); /* an hwloc file */
  assert_int_equal(topo_load_nccl(path, 0, &t, NULL), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "is an hwloc topology"));
}

static cJSON *compare(const hsr_topo *a, const hsr_topo *b, int want) {
  char *js = NULL;
  int n = -1;
  assert_int_equal(topo_compare(a, b, &js, &n), HSR_OK);
  cJSON *o = cJSON_Parse(js);
  free(js);
  assert_non_null(o);
  if (n != want) fail_msg("%d differences, expected %d", n, want);
  assert_int_equal(cJSON_GetObjectItem(o, "count")->valueint, want);
  return o;
}

/* hwloc's and NCCL's readings of one machine agree: NODE = PHB only. */
static void compare_agree(void **s) {
  (void)s;
  hsr_topo *a = hwloc("dgx-h100-like.xml"), *b = nccl("dgx-h100-like.xml", 0, NULL);
  cJSON *o = compare(a, b, 0);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "equivalent")), 24); /* 8 GPUs x 3 NODE NICs */
  cJSON_Delete(o);
  o = compare(a, a, 0);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "equivalent")), 0);
  cJSON_Delete(o);
  topo_free(a);
  topo_free(b);
}

static int count_what(const cJSON *diffs, const char *what, const char *gpu) {
  int n = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, diffs) {
    const cJSON *g = cJSON_GetObjectItem(d, "gpu");
    n += !strcmp(cJSON_GetObjectItem(d, "what")->valuestring, what) && (!gpu || (g && !strcmp(g->valuestring, gpu)));
  }
  return n;
}

/* Planted: NCCL misses GPU 7, GPU 6 has no NVLinks, mlx5_3 sits on the
 * other CPU. Every one shows up, and nothing else. */
static void compare_disagree(void **s) {
  (void)s;
  hsr_topo *a = hwloc("dgx-h100-like.xml"), *b = nccl("dgx-h100-disagree.xml", 0, NULL);
  cJSON *o = compare(a, b, 10);
  const cJSON *d = cJSON_GetObjectItem(o, "differences");
  assert_int_equal(count_what(d, "gpus_only_in_a", "0000:c3:00.0"), 1);
  assert_int_equal(count_what(d, "nvlink_domains", NULL), 1);
  assert_int_equal(count_what(d, "nic_pick", "0000:43:00.0"), 1);
  assert_int_equal(count_what(d, "nic_pick", NULL), 1);
  assert_int_equal(count_what(d, "path_class", NULL), 7); /* every GPU NCCL sees, to mlx5_3 */
  assert_int_equal(count_what(d, "path_class", "0000:43:00.0"), 1);
  const cJSON *dom = NULL, *x;
  cJSON_ArrayForEach(x, d) if (!strcmp(cJSON_GetObjectItem(x, "what")->valuestring, "nvlink_domains")) dom = x;
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(dom, "a")), 1);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(dom, "b")), 2);
  assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "gpus_only_in_a"), 0)->valuestring, "0000:c3:00.0");
  cJSON_Delete(o);
  topo_free(a);
  topo_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dump_dgx),  cmocka_unit_test(azure_ndv4),    cmocka_unit_test(azure_ncv4),
      cmocka_unit_test(aws_p4d),   cmocka_unit_test(bcm_levels),    cmocka_unit_test(fused_hosts),
      cmocka_unit_test(bad_files), cmocka_unit_test(compare_agree), cmocka_unit_test(compare_disagree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
