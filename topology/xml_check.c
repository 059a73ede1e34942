/* What hwloc's XML reader crashes on, refused before it reads the file:
 * found by fuzzing (tests/fuzz/fuzz_topo_xml.c; hwloc 2.9 dereferences a
 * missing set of the root object). Every object hwloc writes that has one of
 * cpuset, complete_cpuset, nodeset, complete_nodeset has all four. */
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <string.h>

#include "topo_internal.h"

static const char *const sets[] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};

static hsr_status check_object(const char *path, xmlNodePtr o) {
  int have = 0, missing = -1;
  for (int i = 0; i < 4; i++) {
    if (xmlHasProp(o, (const xmlChar *)sets[i]))
      have++;
    else if (missing < 0)
      missing = i;
  }
  if (have == 0 || have == 4) return HSR_OK;
  xmlChar *type = xmlGetProp(o, (const xmlChar *)"type");
  hsr_status st = hsr_error(HSR_ERR_IO,
                            "topology XML '%s': object %s (line %ld) has %d of cpuset, complete_cpuset, nodeset, "
                            "complete_nodeset but no %s (hwloc writes all four or none)",
                            path, type ? (const char *)type : "?", xmlGetLineNo(o), have, sets[missing]);
  xmlFree(type);
  return st;
}

static hsr_status walk(const char *path, xmlNodePtr n, int depth) {
  if (depth > 256) return hsr_error(HSR_ERR_IO, "topology XML '%s': objects nested deeper than 256", path);
  for (; n; n = n->next) {
    if (n->type != XML_ELEMENT_NODE) continue;
    if (!strcmp((const char *)n->name, "object")) HSR_CHECK(check_object(path, n));
    HSR_CHECK(walk(path, n->children, depth + 1));
  }
  return HSR_OK;
}

hsr_status topo_xml_precheck(const char *path) {
  xmlDocPtr doc = xmlReadFile(path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (!doc) return HSR_OK; /* hwloc reports what is not XML at all */
  hsr_status st = walk(path, xmlDocGetRootElement(doc), 0);
  xmlFreeDoc(doc);
  return st;
}
