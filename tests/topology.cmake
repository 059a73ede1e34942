# topology/: the mesh planner, discovery from hwloc XML, the gathered view, hsr topo / hsr mesh.
hsr_add_unit(test_topo_mesh test_topo_mesh.c)
hsr_add_unit(test_topo_xml test_topo_xml.c)
