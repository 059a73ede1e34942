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

Run: python3 gen_synthetic.py (from this folder)."""


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


def bridge(g, busid, sec, sub, depth, children, ind, host=False):
    gp = g.next()
    if host:
        head = f'{ind}<object type="Bridge" gp_index="{gp}" bridge_type="0-1" depth="0" bridge_pci="0000:[{sec:02x}-{sub:02x}]">'
    else:
        head = (f'{ind}<object type="Bridge" gp_index="{gp}" bridge_type="1-1" depth="{depth}" '
                f'bridge_pci="0000:[{sec:02x}-{sub:02x}]" pci_busid="{busid}" pci_type="0604 [10b5:c010] [0000:0000] 00" '
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


for name, fn in [("cpu-2numa.xml", cpu2), ("cpu-2x1.xml", cpu2x1), ("dgx-h100-like.xml", dgx), ("pcie-4gpu.xml", pcie4), ("nvl-2node.xml", nvl2)]:
    with open(name, "w") as f:
        f.write(fn())
