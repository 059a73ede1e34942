#!/usr/bin/env python3
"""Writes the synthetic hwloc XML topologies in this folder (hwloc 2.0 format).

  dgx-h100-like.xml  2 packages / 2 NUMA nodes, 8 GPUs, each with its NIC on
                     the same PCIe switch, 4 NVSwitches; NVLinkBandwidth has
                     only GPU<->NVSwitch links (all-to-all through switches).
  pcie-4gpu.xml      2 packages, 4 GPUs on PCIe only (no NVLink), 2 ConnectX
                     NICs (one behind a nested switch) and an onboard NIC.
  nvl-2node.xml      one tray of a 2-node multi-node-NVLink system: 4 GPUs
                     that report fabric cluster UUID + clique id through the
                     GPU info attributes HSRFabricClusterUUID / HSRFabricCliqueId.

  cpu-2numa.xml      2 packages / 2 NUMA nodes of 4 cpus, no GPUs (binding spread).
  cpu-2x1.xml        2 NUMA nodes of one cpu each (cpus 0 and 1): hsr-run --bind auto
                     test that any host with 2 cpus can apply.
  snc2-gpu.xml       1 package split in 2 NUMA nodes (sub-NUMA clustering): GPU0 and
                     mlx5_0 on a host bridge local to the whole package (both NUMA
                     nodes), GPU1 on NUMA 0's host bridge, mlx5_1 on NUMA 1's.
  bcm-2level.xml     a Broadcom Gen5 PEX switch in base mode (two levels that NCCL
                     flattens into one) with GPU0 and mlx5_0, beside a two-level PLX
                     tree with GPU1 and mlx5_1 (PXB).

  NCCL topology files (NCCL_TOPO_DUMP_FILE format) in nccl/:
  nccl/dgx-h100-like.xml     what NCCL would dump on dgx-h100-like.xml's machine.
  nccl/dgx-h100-disagree.xml the same with differences planted for the comparison
                             test: GPU 7 missing, GPU 6 without NVLinks, mlx5_3
                             moved to the other CPU.
  nccl/bcm-2level.xml        NCCL's view of bcm-2level.xml.
  nccl/nvl-2host.xml         a multi-node NVLink dump fused over 2 hosts (host_hash),
                             4 GPUs each, every GPU linked to the NVSwitch fabric.

Run: python3 gen_synthetic.py (from this folder)."""
import os


class Gen:
    def __init__(self):
        self.gp = 1

    def next(self):
        self.gp += 1
        return self.gp


def mask(cpus):
    v = 0
    for c in cpus:
        v |= 1 << c
    return "0x%08x" % v


def cpu_attrs(cpus, nodes):
    m, n = mask(cpus), mask(nodes)
    return f'cpuset="{m}" complete_cpuset="{m}" nodeset="{n}" complete_nodeset="{n}"'


def package(g, p, cpus, io, ind):
    s = [f'{ind}<object type="Package" os_index="{p}" {cpu_attrs(cpus, [p])} gp_index="{g.next()}">',
         f'{ind}  <object type="NUMANode" os_index="{p}" {cpu_attrs(cpus, [p])} gp_index="{g.next()}" local_memory="68719476736"/>']
    for c in cpus:
        s.append(f'{ind}  <object type="Core" os_index="{c}" {cpu_attrs([c], [p])} gp_index="{g.next()}">')
        s.append(f'{ind}    <object type="PU" os_index="{c}" {cpu_attrs([c], [p])} gp_index="{g.next()}"/>')
        s.append(f'{ind}  </object>')
    s += io
    s.append(f'{ind}</object>')
    return s


def bridge(g, busid, sec, sub, depth, children, ind, host=False, ids="[10b5:c010] [0000:0000]"):
    gp = g.next()
    if host:
        head = f'{ind}<object type="Bridge" gp_index="{gp}" bridge_type="0-1" depth="0" bridge_pci="0000:[{sec:02x}-{sub:02x}]">'
    else:
        head = (f'{ind}<object type="Bridge" gp_index="{gp}" bridge_type="1-1" depth="{depth}" '
                f'bridge_pci="0000:[{sec:02x}-{sub:02x}]" pci_busid="{busid}" pci_type="0604 {ids} 00" '
                f'pci_link_speed="31.500000">')
    return [head] + children + [f'{ind}</object>']


def pcidev(g, busid, cls, vid, did, ind, osdevs=(), infos=(), subtype=None, out_gp=None):
    gp = g.next()
    if out_gp is not None:
        out_gp.append(gp)
    st = f' subtype="{subtype}"' if subtype else ""
    s = [f'{ind}<object type="PCIDev" gp_index="{gp}"{st} pci_busid="{busid}" pci_type="{cls} [{vid}:{did}] [{vid}:0000] 00" pci_link_speed="31.500000">']
    for k, v in infos:
        s.append(f'{ind}  <info name="{k}" value="{v}"/>')
    for name, ostype, sub in osdevs:
        s.append(f'{ind}  <object type="OSDev" gp_index="{g.next()}" name="{name}" subtype="{sub}" osdev_type="{ostype}"/>')
    s.append(f'{ind}</object>')
    return s


NET, OFED, COPROC = 2, 3, 5


def ib_nic(name, netname):
    return [(netname, NET, ""), (name, OFED, "")]


def machine(g, host, packages, extra=""):
    allcpus = sorted(c for _, cpus, _ in packages for c in cpus)
    nodes = [p for p, _, _ in packages]
    s = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">', '<topology version="2.0">',
         f'  <object type="Machine" os_index="0" {cpu_attrs(allcpus, nodes)} gp_index="1">',
         f'    <info name="HostName" value="{host}"/>', '    <info name="Backend" value="Linux"/>']
    for p, cpus, io in packages:
        s += package(g, p, cpus, io, "    ")
    s.append('  </object>')
    s.append(extra)
    s.append('</topology>')
    return "\n".join(x for x in s if x) + "\n"


def dgx():
    g = Gen()
    gpu_gp, sw_gp = [], []
    bases = [0x10, 0x20, 0x30, 0x40, 0x90, 0xa0, 0xb0, 0xc0]
    io = {0: [], 1: []}
    for i, b in enumerate(bases):
        ind = "      "
        gpu = pcidev(g, f"0000:{b + 3:02x}:00.0", "0302", "10de", "2330", ind + "        ",
                     osdevs=[(f"cuda{i}", COPROC, "CUDA")], out_gp=gpu_gp)
        nic = pcidev(g, f"0000:{b + 4:02x}:00.0", "0207", "15b3", "1021", ind + "        ",
                     osdevs=ib_nic(f"mlx5_{i}", f"ibp{b + 4:x}s0"))
        down_a = bridge(g, f"0000:{b + 2:02x}:00.0", b + 3, b + 3, 3, gpu, ind + "      ")
        down_b = bridge(g, f"0000:{b + 2:02x}:01.0", b + 4, b + 4, 3, nic, ind + "      ")
        up = bridge(g, f"0000:{b + 1:02x}:00.0", b + 2, b + 4, 2, down_a + down_b, ind + "    ")
        root = bridge(g, f"0000:{b:02x}:01.0", b + 1, b + 4, 1, up, ind + "  ")
        io[i // 4] += bridge(g, None, b, b + 4, 0, root, ind, host=True)
    # NVSwitches: PCI devices with a bridge class on package 0's chipset.
    sws = []
    for k in range(4):
        sws += pcidev(g, f"0000:06:{k:02x}.0", "0680", "10de", "22a3", "          ", subtype="NVSwitch", out_gp=sw_gp)
    io[0] = bridge(g, None, 0x05, 0x06, 0, bridge(g, "0000:05:00.0", 0x06, 0x06, 1, sws, "        "), "      ",
                   host=True) + io[0]
    # 18 NVLink4 links per GPU over 4 switches (5+4+4+5), 25000 MB/s each.
    links = [5, 4, 4, 5]
    objs = [f"PCIDev:{x}" for x in gpu_gp + sw_gp]
    n = len(objs)
    vals = [[0] * n for _ in range(n)]
    for i in range(8):
        for k in range(4):
            vals[i][8 + k] = vals[8 + k][i] = links[k] * 25000
    flat = " ".join(str(v) for row in vals for v in row) + " "
    idx = " ".join(objs) + " "
    extra = (f'  <distances2hetero nbobjs="{n}" kind="25" name="NVLinkBandwidth">\n'
             f'    <indexes length="{len(idx)}">{idx}</indexes>\n'
             f'    <u64values length="{len(flat)}">{flat}</u64values>\n'
             f'  </distances2hetero>')
    pk = [(0, list(range(0, 8)), io[0]), (1, list(range(8, 16)), io[1])]
    return machine(g, "dgx-h100-like", pk, extra)


def pcie4():
    g = Gen()
    ind = "      "
    # package 0: one switch with GPU0, GPU1 and a nested switch holding mlx5_0; onboard eno1 on the host bridge.
    g0 = pcidev(g, "0000:04:00.0", "0302", "10de", "2236", ind + "        ")
    g1 = pcidev(g, "0000:05:00.0", "0302", "10de", "2236", ind + "        ")
    n0 = pcidev(g, "0000:08:00.0", "0207", "15b3", "101b", ind + "            ", osdevs=ib_nic("mlx5_0", "ib0"))
    nest = bridge(g, "0000:07:00.0", 0x08, 0x08, 4, n0, ind + "          ")
    sw0 = bridge(g, "0000:03:00.0", 0x04, 0x04, 3, g0, ind + "      ") + \
        bridge(g, "0000:03:01.0", 0x05, 0x05, 3, g1, ind + "      ") + \
        bridge(g, "0000:03:02.0", 0x06, 0x08, 3, bridge(g, "0000:06:00.0", 0x07, 0x08, 3, nest, ind + "        "),
               ind + "      ")
    up0 = bridge(g, "0000:02:00.0", 0x03, 0x08, 2, sw0, ind + "    ")
    eno = pcidev(g, "0000:00:1f.6", "0200", "8086", "15b9", ind + "  ", osdevs=[("eno1", NET, "")])
    io0 = bridge(g, None, 0x00, 0x08, 0, bridge(g, "0000:00:01.0", 0x02, 0x08, 1, up0, ind + "  ") + eno, ind,
                 host=True)
    # package 1: GPU2, GPU3 and mlx5_1 on one switch.
    g2 = pcidev(g, "0000:84:00.0", "0302", "10de", "2236", ind + "        ")
    g3 = pcidev(g, "0000:85:00.0", "0302", "10de", "2236", ind + "        ")
    n1 = pcidev(g, "0000:86:00.0", "0207", "15b3", "101b", ind + "        ", osdevs=ib_nic("mlx5_1", "ib1"))
    sw1 = bridge(g, "0000:83:00.0", 0x84, 0x84, 3, g2, ind + "      ") + \
        bridge(g, "0000:83:01.0", 0x85, 0x85, 3, g3, ind + "      ") + \
        bridge(g, "0000:83:02.0", 0x86, 0x86, 3, n1, ind + "      ")
    up1 = bridge(g, "0000:82:00.0", 0x83, 0x86, 2, sw1, ind + "    ")
    io1 = bridge(g, None, 0x80, 0x86, 0, bridge(g, "0000:80:01.0", 0x82, 0x86, 1, up1, ind + "  "), ind, host=True)
    return machine(g, "pcie-4gpu", [(0, list(range(0, 4)), io0), (1, list(range(4, 8)), io1)])


def nvl2():
    g = Gen()
    ind = "      "
    io = []
    for i in range(4):
        b = 0x10 * (i + 1)
        infos = [("HSRFabricClusterUUID", "5d8e2f1a-7c44-4b9e-9a31-0c6f2b7e9d10"), ("HSRFabricCliqueId", "32766")]
        gpu = pcidev(g, f"0000:{b + 2:02x}:00.0", "0302", "10de", "2941", ind + "      ", infos=infos)
        nic = pcidev(g, f"0000:{b + 3:02x}:00.0", "0207", "15b3", "1021", ind + "      ",
                     osdevs=ib_nic(f"mlx5_{i}", f"ibp{b + 3:x}s0"))
        sw = bridge(g, f"0000:{b + 1:02x}:00.0", b + 2, b + 2, 2, gpu, ind + "    ") + \
            bridge(g, f"0000:{b + 1:02x}:01.0", b + 3, b + 3, 2, nic, ind + "    ")
        io += bridge(g, None, b, b + 3, 0, bridge(g, f"0000:{b:02x}:00.0", b + 1, b + 3, 1, sw, ind + "  "), ind,
                     host=True)
    return machine(g, "nvl-tray", [(0, list(range(0, 8)), io)])


def cpu2():
    g = Gen()
    return machine(g, "cpu-2numa", [(0, list(range(0, 4)), []), (1, list(range(4, 8)), [])])


def cpu2x1():
    g = Gen()
    return machine(g, "cpu-2x1", [(0, [0], []), (1, [1], [])])


def snc2():
    g = Gen()
    ind = "      "
    # package-wide host bridge: root port, one switch with GPU0 and mlx5_0
    gpu0 = pcidev(g, "0000:03:00.0", "0302", "10de", "2330", ind + "        ")
    nic0 = pcidev(g, "0000:04:00.0", "0207", "15b3", "1021", ind + "        ", osdevs=ib_nic("mlx5_0", "ibp4s0"))
    sw = bridge(g, "0000:02:00.0", 0x03, 0x03, 3, gpu0, ind + "      ") + \
        bridge(g, "0000:02:01.0", 0x04, 0x04, 3, nic0, ind + "      ")
    up = bridge(g, "0000:01:00.0", 0x02, 0x04, 2, sw, ind + "    ")
    hb_pkg = bridge(g, None, 0x00, 0x04, 0, bridge(g, "0000:00:01.0", 0x01, 0x04, 1, up, ind + "  "), ind, host=True)
    # one host bridge per NUMA node
    gpu1 = pcidev(g, "0000:21:00.0", "0302", "10de", "2330", ind + "      ")
    hb0 = bridge(g, None, 0x20, 0x21, 0, bridge(g, "0000:20:01.0", 0x21, 0x21, 1, gpu1, ind + "    "), ind + "  ",
                 host=True)
    nic1 = pcidev(g, "0000:31:00.0", "0207", "15b3", "1021", ind + "      ", osdevs=ib_nic("mlx5_1", "ibp49s0"))
    hb1 = bridge(g, None, 0x30, 0x31, 0, bridge(g, "0000:30:01.0", 0x31, 0x31, 1, nic1, ind + "    "), ind + "  ",
                 host=True)
    s = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">', '<topology version="2.0">',
         f'  <object type="Machine" os_index="0" {cpu_attrs(range(8), [0, 1])} gp_index="1">',
         '    <info name="HostName" value="snc2-gpu"/>', '    <info name="Backend" value="Linux"/>',
         f'    <object type="Package" os_index="0" {cpu_attrs(range(8), [0, 1])} gp_index="{g.next()}">']
    for die, cpus, io in [(0, range(0, 4), hb0), (1, range(4, 8), hb1)]:
        s.append(f'      <object type="Die" os_index="{die}" {cpu_attrs(cpus, [die])} gp_index="{g.next()}">')
        s.append(f'        <object type="NUMANode" os_index="{die}" {cpu_attrs(cpus, [die])} gp_index="{g.next()}" '
                 'local_memory="68719476736"/>')
        for c in cpus:
            s.append(f'        <object type="Core" os_index="{c}" {cpu_attrs([c], [die])} gp_index="{g.next()}">')
            s.append(f'          <object type="PU" os_index="{c}" {cpu_attrs([c], [die])} gp_index="{g.next()}"/>')
            s.append('        </object>')
        s += ["  " + x for x in io]
        s.append('      </object>')
    s += hb_pkg
    s += ['    </object>', '  </object>', '</topology>']
    return "\n".join(s) + "\n"


BCM0, BCM1, PLX = "[1000:c030] [1000:0000]", "[1000:c030] [1000:1000]", "[10b5:8796] [0000:0000]"


def bcm():
    g = Gen()
    ind = "      "
    # Broadcom Gen5 switch in base mode: u0 (level 0) -> d0a -> u1 (level 1) -> d1a -> GPU0; d0b -> mlx5_0
    gpu0 = pcidev(g, "0000:05:00.0", "0302", "10de", "2330", ind + "              ")
    nic0 = pcidev(g, "0000:06:00.0", "0207", "15b3", "1021", ind + "          ", osdevs=ib_nic("mlx5_0", "ibp6s0"))
    u1 = bridge(g, "0000:03:00.0", 0x04, 0x05, 4,
                bridge(g, "0000:04:00.0", 0x05, 0x05, 5, gpu0, ind + "            ", ids=BCM1), ind + "          ",
                ids=BCM1)
    u0 = bridge(g, "0000:01:00.0", 0x02, 0x06, 2,
                bridge(g, "0000:02:00.0", 0x03, 0x05, 3, u1, ind + "        ", ids=BCM0) +
                bridge(g, "0000:02:01.0", 0x06, 0x06, 3, nic0, ind + "        ", ids=BCM0), ind + "    ", ids=BCM0)
    hb0 = bridge(g, None, 0x00, 0x06, 0, bridge(g, "0000:00:01.0", 0x01, 0x06, 1, u0, ind + "  "), ind, host=True)
    # the same shape with a PLX switch behind a PLX switch: two switches, PXB
    gpu1 = pcidev(g, "0000:45:00.0", "0302", "10de", "2330", ind + "              ")
    nic1 = pcidev(g, "0000:46:00.0", "0207", "15b3", "1021", ind + "          ", osdevs=ib_nic("mlx5_1", "ibp70s0"))
    p1 = bridge(g, "0000:43:00.0", 0x44, 0x45, 4,
                bridge(g, "0000:44:00.0", 0x45, 0x45, 5, gpu1, ind + "            ", ids=PLX), ind + "          ",
                ids=PLX)
    p0 = bridge(g, "0000:41:00.0", 0x42, 0x46, 2,
                bridge(g, "0000:42:00.0", 0x43, 0x45, 3, p1, ind + "        ", ids=PLX) +
                bridge(g, "0000:42:01.0", 0x46, 0x46, 3, nic1, ind + "        ", ids=PLX), ind + "    ", ids=PLX)
    hb1 = bridge(g, None, 0x40, 0x46, 0, bridge(g, "0000:40:01.0", 0x41, 0x46, 1, p0, ind + "  "), ind, host=True)
    return machine(g, "bcm-2level", [(0, list(range(0, 4)), hb0 + hb1)])


# ---- NCCL's format (what NCCL_TOPO_DUMP_FILE writes) ----------------------

def n_cpu(numaid, cpus, body, host_hash=None):
    hh = f' host_hash="{host_hash}"' if host_hash else ""
    aff = "%08x" % sum(1 << c for c in cpus)
    return ([f'  <cpu{hh} numaid="{numaid}" affinity="{aff}" arch="x86_64" vendor="GenuineIntel" familyid="6" '
             f'modelid="143">'] + ["  " + x for x in body] + ['  </cpu>'])


def n_switch(busid, children, ids=("0x1000", "0xc010", "0x1000", "0xa000")):
    v, d, sv, sd = ids
    return ([f'  <pci busid="{busid}" class="0x060400" vendor="{v}" device="{d}" subsystem_vendor="{sv}" '
             f'subsystem_device="{sd}" link_speed="32.0 GT/s PCIe" link_width="16">'] +
            ["  " + x for x in children] + ['  </pci>'])


def n_gpu(busid, dev, nvlinks=(), sm=90):
    head = (f'  <pci busid="{busid}" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" '
            f'subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16">')
    gpu = f'    <gpu dev="{dev}" sm="{sm}" rank="{dev}" gdr="1"'
    if not nvlinks:
        return [head, gpu + '/>', '  </pci>']
    links = [f'      <nvlink target="{t}" count="{n}" tclass="{c}"/>' for t, n, c in nvlinks]
    return [head, gpu + '>'] + links + ['    </gpu>', '  </pci>']


def n_nic(busid, name, dev):
    return [f'  <pci busid="{busid}" class="0x020700" vendor="0x15b3" device="0x1021" subsystem_vendor="0x15b3" '
            f'subsystem_device="0x0023" link_speed="32.0 GT/s PCIe" link_width="16">',
            f'    <nic>', f'      <net name="{name}" dev="{dev}" speed="400000" port="1" latency="0.000000" '
            f'guid="0x{dev + 1:x}" maxconn="131072" gdr="1"/>', '    </nic>', '  </pci>']


def n_system(body):
    return "\n".join(['<system version="1">'] + body + ['</system>']) + "\n"


NVS = "0x068000"


def nccl_dgx(disagree=False):
    bases = [0x10, 0x20, 0x30, 0x40, 0x90, 0xa0, 0xb0, 0xc0]
    cpus = {0: [], 1: []}
    for i, b in enumerate(bases):
        if disagree and i == 7:
            continue  # NCCL does not see GPU 7
        links = [] if disagree and i == 6 else [(f"0000:06:{k:02x}.0", n, NVS) for k, n in enumerate([5, 4, 4, 5])]
        sw = n_gpu(f"0000:{b + 3:02x}:00.0", i, links)
        nic = n_nic(f"0000:{b + 4:02x}:00.0", f"mlx5_{i}", i)
        if disagree and i == 3:
            cpus[1] += nic  # mlx5_3 on the other CPU
        else:
            sw += nic
        cpus[i // 4] += n_switch(f"0000:{b + 1:02x}:00.0", sw)
    hh = "0x5c1e0a7d9b3f4e21"
    return n_system(n_cpu(0, range(0, 8), cpus[0], hh) + n_cpu(1, range(8, 16), cpus[1], hh))


def nccl_bcm():
    b0, b1 = ("0x1000", "0xc030", "0x1000", "0x0000"), ("0x1000", "0xc030", "0x1000", "0x1000")
    plx = ("0x10b5", "0x8796", "0x0000", "0x0000")
    sw0 = n_switch("0000:01:00.0", n_switch("0000:03:00.0", n_gpu("0000:05:00.0", 0), b1) +
                   n_nic("0000:06:00.0", "mlx5_0", 0), b0)
    sw1 = n_switch("0000:41:00.0", n_switch("0000:43:00.0", n_gpu("0000:45:00.0", 1), plx) +
                   n_nic("0000:46:00.0", "mlx5_1", 1), plx)
    return n_system(n_cpu(0, range(0, 4), sw0 + sw1, "0x2b7c44e190d35a18"))


def nccl_nvl2():
    body = []
    for h, hh in enumerate(["0x9a1f00c2d4e35b67", "0x9a1f00c2d4e35b68"]):
        devs = []
        for i in range(4):
            b = 0x10 * (i + 1)
            sw = n_gpu(f"000{h + 8}:{b + 2:02x}:00.0", i, [("0000:00:00.0", 18, NVS)], sm=100) + \
                n_nic(f"000{h + 8}:{b + 3:02x}:00.0", f"mlx5_{i}", i)
            devs += n_switch(f"000{h + 8}:{b + 1:02x}:00.0", sw)
        body += n_cpu(0, range(0, 8), devs, hh)
    return n_system(body)


here = os.path.dirname(os.path.abspath(__file__))
os.makedirs(os.path.join(here, "nccl"), exist_ok=True)
for name, fn in [("cpu-2numa.xml", cpu2), ("cpu-2x1.xml", cpu2x1), ("dgx-h100-like.xml", dgx), ("pcie-4gpu.xml", pcie4),
                 ("nvl-2node.xml", nvl2), ("snc2-gpu.xml", snc2), ("bcm-2level.xml", bcm),
                 ("nccl/dgx-h100-like.xml", nccl_dgx), ("nccl/dgx-h100-disagree.xml", lambda: nccl_dgx(True)),
                 ("nccl/bcm-2level.xml", nccl_bcm), ("nccl/nvl-2host.xml", nccl_nvl2)]:
    with open(os.path.join(here, name), "w") as f:
        f.write(fn())
