/*
 * Walking Apple property lists parsed by libxml2 (internal to pkgio/): the
 * manifest reader and the patcher, which rewrites a few values in place.
 */
#ifndef ORION_PLIST_UTIL_H
#define ORION_PLIST_UTIL_H

#include <libxml/tree.h>
#include <stdbool.h>
#include <string.h>

static inline bool plist_is_elem(xmlNodePtr n, const char *name) {
  return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

static inline xmlNodePtr plist_next_elem(xmlNodePtr n) {
  while (n && n->type != XML_ELEMENT_NODE) n = n->next;
  return n;
}

/* The value element following <key>name</key> in a dict, or NULL. */
static inline xmlNodePtr plist_dict_get(xmlNodePtr dict, const char *name) {
  for (xmlNodePtr k = plist_next_elem(dict ? dict->children : NULL); k; k = plist_next_elem(k->next)) {
    xmlNodePtr v = plist_next_elem(k->next);
    if (!plist_is_elem(k, "key") || !v) return NULL;
    xmlChar *text = xmlNodeGetContent(k);
    bool match = text && !strcmp((const char *)text, name);
    xmlFree(text);
    if (match) return v;
    k = v;
  }
  return NULL;
}

#endif
