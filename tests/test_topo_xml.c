/* Discovery from hwloc XML: exact GPUs, NUMA nodes, NIC path classes, NVLink
 * domains (and the rule that formed them) per file in tests/data; the NIC
 * NCCL would pick and the node summary; the offline cluster view and auto
 * mesh on them; binding recommendations; JSON; bad files give clear errors.
 * (Every file's whole output is also pinned by the golden files.) */
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

static hsr_topo *load(const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", HSR_TEST_DATA, file);
  hsr_topo *t = NULL;
  hsr_status st = topo_discover(path, &t);
  if (st != HSR_OK) fail_msg("%s: %s", file, hsr_last_error());
  return t;
}

/* "name:PATH name:PATH ..." of a GPU's NICs, closest first. */
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

static void expect_gpu(const hsr_topo *t, int g, const char *pci, int numa, int domain) {
  assert_string_equal(topo_gpu_pci(t, g), pci);
  assert_int_equal(topo_gpu_numa(t, g), numa);
  assert_int_equal(topo_gpu_domain(t, g), domain);
}

static void xeon_24em64t(void **s) {
  (void)s;
  hsr_topo *t = load("24em64t-2n6c2t-pci.xml");
  assert_string_equal(topo_host(t), "mirage004");
  assert_int_equal(topo_num_numa(t), 2);
  assert_int_equal(topo_num_gpus(t), 3);
  expect_gpu(t, 0, "0000:06:00.0", 0, 0);
  expect_gpu(t, 1, "0000:11:00.0", 1, 1);
  expect_gpu(t, 2, "0000:14:00.0", 1, 2);
  assert_int_equal(topo_num_domains(t), 3);
  assert_string_equal(topo_nvlink_source(t), "none");
  assert_string_equal(topo_domain_rule(t), "unknown"); /* an XML without NVLinkBandwidth cannot tell */
  assert_non_null(strstr(topo_notes(t), "no NVLinkBandwidth"));
  expect_nics(t, 0, "eth0:PHB eth1:PHB mlx4_0:PHB");
  expect_nics(t, 1, "eth0:SYS eth1:SYS mlx4_0:SYS");
  assert_string_equal(topo_gpu_cpuset(t, 0), "0,2,4,6,8,10,12,14,16,18,20,22");
  assert_int_equal(topo_gpu_cuda(t, 0), -1);
  topo_free(t);
}

static void xeon_32em64t(void **s) {
  (void)s;
  hsr_topo *t = load("32em64t-2n8c2t-pci-wholeio.xml");
  assert_int_equal(topo_num_gpus(t), 3); /* the VGA functions are not NVIDIA 3D/VGA GPUs */
  expect_gpu(t, 0, "0000:03:00.0", 0, 0);
  expect_gpu(t, 1, "0000:83:00.0", 1, 1);
  expect_gpu(t, 2, "0000:84:00.0", 1, 2);
  assert_int_equal(topo_gpu_cuda(t, 2), 0); /* its cuda0 OS device */
  expect_nics(t, 0, "eth0:SYS eth1:SYS mlx5_0:SYS");
  expect_nics(t, 1, "eth0:PHB eth1:PHB mlx5_0:PHB");
  expect_nics(t, 2, "mlx5_0:PIX eth0:PHB eth1:PHB");
  assert_string_equal(topo_gpu_cpuset(t, 1), "8-15,24-31");
  topo_free(t);
}

static void power8_nvlink(void **s) {
  (void)s;
  hsr_topo *t = load("power8gpudistances.xml");
  assert_int_equal(topo_num_gpus(t), 4);
  expect_gpu(t, 0, "0002:01:00.0", 0, 0);
  expect_gpu(t, 1, "0003:01:00.0", 0, 0);
  expect_gpu(t, 2, "000a:01:00.0", 1, 1);
  expect_gpu(t, 3, "000b:01:00.0", 1, 1);
  assert_int_equal(topo_num_domains(t), 2); /* GPU-CPU links join nothing */
  assert_string_equal(topo_nvlink_source(t), "hwloc");
  assert_string_equal(topo_domain_rule(t), "nvlink-components");
  assert_string_equal(topo_nvlink_unit(t), "MB/s");
  assert_true(topo_nvlink_bw(t, 0, 1) == 40000.0);
  assert_true(topo_nvlink_bw(t, 2, 3) == 40000.0);
  assert_true(topo_nvlink_bw(t, 0, 2) == 0.0);
  for (int g = 0; g < 4; g++) {
    assert_int_equal(topo_gpu_cuda(t, g), g);
    assert_int_equal(topo_gpu_num_nics(t, g), 0);
  }
  hsr_cluster *c;
  assert_int_equal(cluster_synthetic(t, 1, 4, &c), HSR_OK);
  assert_int_equal(cluster_domain_size(c), 2);
  mesh_request req = {4, 0, 0};
  hsr_mesh *m;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK); /* union of the two NVLink pairs */
  mesh_free(m);
  cluster_free(c);
  topo_free(t);
}

static void dgx_h100(void **s) {
  (void)s;
  hsr_topo *t = load("dgx-h100-like.xml");
  static const char *pci[8] = {"0000:13:00.0", "0000:23:00.0", "0000:33:00.0", "0000:43:00.0",
                               "0000:93:00.0", "0000:a3:00.0", "0000:b3:00.0", "0000:c3:00.0"};
  assert_int_equal(topo_num_gpus(t), 8);
  assert_int_equal(topo_num_numa(t), 2);
  assert_int_equal(topo_num_domains(t), 1);
  assert_string_equal(topo_nvlink_source(t), "hwloc");
  assert_string_equal(topo_domain_rule(t), "nvswitch");
  char sum[128];
  assert_int_equal(topo_summary(t, sum, sizeof sum), HSR_OK);
  assert_string_equal(sum, "8 GPUs, one NVSwitch domain, 8 NICs at PIX");
  assert_int_equal(topo_summary(t, sum, 8), HSR_ERR_INVALID); /* does not fit */
  assert_int_equal(topo_num_nics(t), 8);
  for (int g = 0; g < 8; g++) {
    expect_gpu(t, g, pci[g], g / 4, 0);
    assert_int_equal(topo_gpu_cuda(t, g), g); /* its cudaN OS device */
    assert_string_equal(topo_gpu_cpuset(t, g), g < 4 ? "0-7" : "8-15");
    assert_int_equal(topo_gpu_num_nics(t, g), 8);
    const char *name;
    topo_path p;
    char want[16];
    snprintf(want, sizeof want, "mlx5_%d", g);
    assert_int_equal(topo_gpu_nic(t, g, 0, &name, &p), HSR_OK);
    assert_string_equal(name, want);
    assert_int_equal(p, HSR_PATH_PIX);
    assert_int_equal(topo_gpu_nic_pick(t, g, &name, &p), HSR_OK); /* NCCL's pick: its own NIC */
    assert_string_equal(name, want);
    /* One NVS node: 18 links x 25000 MB/s through the 4 switches (5+4+4+5). */
    for (int h = 0; h < 8; h++) assert_true(topo_nvlink_bw(t, g, h) == (g == h ? 0.0 : 450000.0));
  }
  /* Each GPU has its own host bridge: the same socket's other NICs are NODE. */
  expect_nics(t, 5, "mlx5_5:PIX mlx5_4:NODE mlx5_6:NODE mlx5_7:NODE mlx5_0:SYS mlx5_1:SYS mlx5_2:SYS mlx5_3:SYS");
  assert_int_equal(topo_gpu_nic(t, 0, 8, NULL, NULL), HSR_ERR_INVALID);

  char set[64];
  assert_int_equal(topo_bind_cpuset(t, 5, 8, set, sizeof set), HSR_OK);
  assert_string_equal(set, "8-15");
  assert_int_equal(topo_bind_cpuset(t, 1, 8, set, sizeof set), HSR_OK);
  assert_string_equal(set, "0-7");
  assert_int_equal(topo_bind_cpuset(t, 8, 8, set, sizeof set), HSR_ERR_INVALID);

  /* Two nodes: two 8-rank domains; auto S = 8, K = 8; S = 16 spans both. */
  hsr_cluster *c;
  assert_int_equal(cluster_synthetic(t, 2, 16, &c), HSR_OK);
  assert_int_equal(cluster_num_domains(c), 2);
  assert_int_equal(cluster_domain_size(c), 8);
  assert_int_equal(cluster_rank_gpu(c, 13), 5);
  assert_int_equal(cluster_rank_node(c, 13), 1);
  mesh_request req = {0, 0, 0};
  hsr_mesh *m;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK);
  assert_int_equal(hsr_mesh_shard(m), 8);
  assert_int_equal(mesh_partial(m), 8);
  mesh_free(m);
  req.shard = 12;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "valid S: 1, 2, 4, 8, 16"));
  cluster_free(c);
  assert_int_equal(cluster_synthetic(t, 1, 16, &c), HSR_ERR_INVALID); /* 16 ranks, 8 GPUs */
  assert_non_null(strstr(hsr_last_error(), "8 GPUs per node"));
  assert_int_equal(cluster_synthetic(t, 3, 16, &c), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "valid nodes: 1, 2, 4, 8, 16"));

  /* JSON shape: nodes[].gpus[].{index,pci,numa,nics[].{name,path}}, nvlink_domains. */
  char *js;
  assert_int_equal(topo_json(t, &js), HSR_OK);
  cJSON *o = cJSON_Parse(js);
  assert_non_null(o);
  cJSON *g3 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "gpus"), 3);
  assert_string_equal(cJSON_GetObjectItem(g3, "pci")->valuestring, "0000:43:00.0");
  assert_int_equal(cJSON_GetObjectItem(g3, "numa")->valueint, 0);
  cJSON *nic0 = cJSON_GetArrayItem(cJSON_GetObjectItem(g3, "nics"), 0);
  assert_string_equal(cJSON_GetObjectItem(nic0, "name")->valuestring, "mlx5_3");
  assert_string_equal(cJSON_GetObjectItem(nic0, "path")->valuestring, "PIX");
  cJSON *doms = cJSON_GetObjectItem(o, "nvlink_domains");
  assert_int_equal(cJSON_GetArraySize(doms), 1);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(doms, 0)), 8);
  cJSON_Delete(o);
  free(js);
  topo_free(t);
}

static void pcie_4gpu(void **s) {
  (void)s;
  hsr_topo *t = load("pcie-4gpu.xml");
  assert_int_equal(topo_num_gpus(t), 4);
  expect_gpu(t, 0, "0000:04:00.0", 0, 0);
  expect_gpu(t, 1, "0000:05:00.0", 0, 1);
  expect_gpu(t, 2, "0000:84:00.0", 1, 2);
  expect_gpu(t, 3, "0000:85:00.0", 1, 3);
  assert_int_equal(topo_num_domains(t), 4);
  expect_nics(t, 0, "mlx5_0:PXB eno1:PHB mlx5_1:SYS"); /* eno1: the same host bridge */
  expect_nics(t, 1, "mlx5_0:PXB eno1:PHB mlx5_1:SYS");
  expect_nics(t, 2, "mlx5_1:PIX mlx5_0:SYS eno1:SYS");
  hsr_cluster *c;
  assert_int_equal(cluster_synthetic(t, 1, 4, &c), HSR_OK);
  assert_int_equal(cluster_domain_size(c), 1);
  mesh_request req = {0, 0, 0};
  hsr_mesh *m;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK);
  assert_int_equal(hsr_mesh_shard(m), 1); /* auto: a PCIe-only domain is one GPU */
  mesh_free(m);
  cluster_free(c);
  topo_free(t);
}

/* NVIDIA DGX-2 (hwloc's test suite): 16 V100 on two baseboards, each GPU
 * linked to the 6 NVSwitches of its board; the boards' switches are joined by
 * trunks hwloc does not list. Connected components would give 2 domains of 8;
 * NCCL (one NVS node) and hsr give one domain of 16. */
static void dgx2_nvswitch(void **s) {
  (void)s;
  hsr_topo *t = load("nvidiaDGX2.xml");
  assert_int_equal(topo_num_gpus(t), 16);
  assert_int_equal(topo_num_domains(t), 1);
  assert_string_equal(topo_domain_rule(t), "nvswitch");
  for (int g = 0; g < 16; g++) assert_int_equal(topo_gpu_domain(t, g), 0);
  assert_true(topo_nvlink_bw(t, 0, 15) == 150000.0); /* 6 links x 25000 MB/s, across the boards */
  assert_true(topo_nvlink_bw(t, 3, 4) == 150000.0);
  hsr_cluster *c;
  assert_int_equal(cluster_synthetic(t, 2, 32, &c), HSR_OK);
  assert_int_equal(cluster_domain_size(c), 16);
  mesh_request req = {0, 0, 0};
  hsr_mesh *m;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK);
  assert_int_equal(hsr_mesh_shard(m), 16); /* not 8 */
  mesh_free(m);
  cluster_free(c);
  topo_free(t);
}

/* One package in two NUMA nodes: a host bridge local to the whole package
 * (GPU0, mlx5_0) and one per NUMA node (GPU1 on 0, mlx5_1 on 1). */
static void snc2_numa(void **s) {
  (void)s;
  hsr_topo *t = load("snc2-gpu.xml");
  assert_int_equal(topo_gpu_num_numa(t, 0), 2);
  assert_int_equal(topo_gpu_numa_at(t, 0, 0), 0);
  assert_int_equal(topo_gpu_numa_at(t, 0, 1), 1);
  assert_int_equal(topo_gpu_numa_at(t, 0, 2), -1);
  assert_string_equal(topo_gpu_cpuset(t, 0), "0-7"); /* the union */
  assert_int_equal(topo_gpu_num_numa(t, 1), 1);
  assert_string_equal(topo_gpu_cpuset(t, 1), "0-3");
  expect_nics(t, 0, "mlx5_0:PIX mlx5_1:NODE"); /* shares NUMA node 1 with mlx5_1 */
  expect_nics(t, 1, "mlx5_0:NODE mlx5_1:SYS"); /* same package, other NUMA node: SYS, as NCCL */
  char set[64];
  assert_int_equal(topo_bind_cpuset(t, 0, 2, set, sizeof set), HSR_OK);
  assert_string_equal(set, "0-7");
  assert_int_equal(topo_bind_cpuset(t, 1, 2, set, sizeof set), HSR_OK);
  assert_string_equal(set, "0-3");
  assert_int_equal(topo_path_nccl(HSR_PATH_NODE), HSR_PATH_PHB);
  assert_int_equal(topo_path_nccl(HSR_PATH_SYS), HSR_PATH_SYS);
  assert_string_equal(topo_path_str(HSR_PATH_NODE), "NODE");
  topo_free(t);
}

/* A Broadcom Gen5 switch in base mode shows two levels that NCCL flattens:
 * GPU0 and mlx5_0 are PIX. A PLX switch behind a PLX switch stays PXB. */
static void bcm_flatten(void **s) {
  (void)s;
  hsr_topo *t = load("bcm-2level.xml");
  expect_nics(t, 0, "mlx5_0:PIX mlx5_1:NODE");
  expect_nics(t, 1, "mlx5_1:PXB mlx5_0:NODE");
  topo_free(t);
}

static void nvl_two_nodes(void **s) {
  (void)s;
  hsr_topo *t = load("nvl-2node.xml");
  assert_int_equal(topo_num_gpus(t), 4);
  assert_int_equal(topo_num_domains(t), 1);
  assert_string_equal(topo_domain_rule(t), "fabric-clique");
  assert_string_equal(topo_nvlink_source(t), "fabric");
  for (int g = 0; g < 4; g++) {
    assert_string_equal(topo_gpu_clique(t, g), "5d8e2f1a-7c44-4b9e-9a31-0c6f2b7e9d10/32766");
    char want[32];
    snprintf(want, sizeof want, "mlx5_%d", g);
    const char *name;
    topo_path p;
    assert_int_equal(topo_gpu_nic(t, g, 0, &name, &p), HSR_OK);
    assert_string_equal(name, want);
    assert_int_equal(p, HSR_PATH_PIX);
  }
  hsr_cluster *c;
  assert_int_equal(cluster_synthetic(t, 2, 8, &c), HSR_OK);
  assert_int_equal(cluster_num_nodes(c), 2);
  assert_int_equal(cluster_num_domains(c), 1); /* one clique over both nodes */
  assert_int_equal(cluster_domain_size(c), 8);
  mesh_request req = {0, 0, 0};
  hsr_mesh *m;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK);
  assert_int_equal(hsr_mesh_shard(m), 8);
  assert_int_equal(mesh_partial(m), 4); /* the group's ranks on one node */
  mesh_free(m);
  cluster_free(c);
  topo_free(t);
}

static void cpu_only_binding(void **s) {
  (void)s;
  hsr_topo *t = load("cpu-2numa.xml");
  assert_int_equal(topo_num_gpus(t), 0);
  assert_int_equal(topo_num_domains(t), 1);
  assert_string_equal(topo_domain_rule(t), "shared-memory");
  char sum[96];
  assert_int_equal(topo_summary(t, sum, sizeof sum), HSR_OK);
  assert_string_equal(sum, "no GPUs, 2 NUMA nodes: one shared-memory domain");
  char set[64];
  static const char *want4[4] = {"0-3", "0-3", "4-7", "4-7"};
  for (int lr = 0; lr < 4; lr++) {
    assert_int_equal(topo_bind_cpuset(t, lr, 4, set, sizeof set), HSR_OK);
    assert_string_equal(set, want4[lr]);
  }
  assert_int_equal(topo_bind_cpuset(t, 0, 1, set, sizeof set), HSR_OK);
  assert_string_equal(set, "0-3");
  assert_int_equal(topo_bind_cpuset(t, 0, 2, set, 2), HSR_ERR_INVALID); /* buffer too small */
  hsr_cluster *c;
  assert_int_equal(cluster_synthetic(t, 2, 6, &c), HSR_OK);
  assert_int_equal(cluster_num_domains(c), 2); /* one per node */
  assert_int_equal(cluster_rank_gpu(c, 0), -1);
  mesh_request req = {3, 0, 0};
  hsr_mesh *m;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK);
  assert_int_equal(hsr_mesh_replicate(m), 2);
  mesh_free(m);
  char *js;
  assert_int_equal(cluster_json(c, &js), HSR_OK);
  cJSON *o = cJSON_Parse(js);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "nodes")), 2);
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "ranks"), 4), "node")->valueint, 1);
  cJSON_Delete(o);
  free(js);
  cluster_free(c);
  topo_free(t);
}

static void write_file(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

static void bad_files(void **s) {
  (void)s;
  hsr_topo *t = (hsr_topo *)1;
  assert_int_equal(topo_discover("/nonexistent/topo.xml", &t), HSR_ERR_IO);
  assert_null(t);
  assert_non_null(strstr(hsr_last_error(), "cannot open topology XML '/nonexistent/topo.xml'"));

  char dir[] = "/tmp/hsr-topo-XXXXXX", path[128];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/t.xml", dir);
  write_file(path, "", 0);
  assert_int_equal(topo_discover(path, &t), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "is empty"));

  write_file(path, "this is not xml\n", 16);
  assert_int_equal(topo_discover(path, &t), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "not a valid hwloc topology"));

  /* The DGX file cut in half. */
  char src[512];
  snprintf(src, sizeof src, "%s/dgx-h100-like.xml", HSR_TEST_DATA);
  FILE *f = fopen(src, "r");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  write_file(path, buf, n / 2);
  assert_int_equal(topo_discover(path, &t), HSR_ERR_IO);
  assert_non_null(strstr(hsr_last_error(), "not a valid hwloc topology"));

  /* Well-formed XML that is not a topology. */
  write_file(path, "<?xml version=\"1.0\"?>\n<nothing/>\n", 33);
  assert_int_equal(topo_discover(path, &t), HSR_ERR_IO);
  unlink(path);
  rmdir(dir);
}

static void env_xml(void **s) {
  (void)s;
  char path[512];
  snprintf(path, sizeof path, "%s/pcie-4gpu.xml", HSR_TEST_DATA);
  setenv("HSR_TOPO_XML", path, 1);
  hsr_topo *t;
  assert_int_equal(topo_discover(NULL, &t), HSR_OK);
  assert_string_equal(topo_host(t), "pcie-4gpu");
  topo_free(t);
  setenv("HSR_TOPO_XML", "/nonexistent.xml", 1); /* a bad setting (the HSR_* registry's check), named */
  assert_int_equal(topo_discover(NULL, &t), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "HSR_TOPO_XML='/nonexistent.xml'"));
  unsetenv("HSR_TOPO_XML");
  /* Live: this host always discovers (no GPUs here: one domain). */
  assert_int_equal(topo_discover(NULL, &t), HSR_OK);
  assert_true(topo_num_numa(t) >= 1);
  assert_int_equal(topo_num_domains(t), topo_num_gpus(t) ? topo_num_domains(t) : 1);
  topo_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(xeon_24em64t),     cmocka_unit_test(xeon_32em64t), cmocka_unit_test(power8_nvlink),
      cmocka_unit_test(dgx_h100),         cmocka_unit_test(pcie_4gpu),    cmocka_unit_test(nvl_two_nodes),
      cmocka_unit_test(cpu_only_binding), cmocka_unit_test(bad_files),    cmocka_unit_test(env_xml),
      cmocka_unit_test(dgx2_nvswitch),    cmocka_unit_test(snc2_numa),    cmocka_unit_test(bcm_flatten),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
