#!/usr/bin/env python3
"""validate_json_schema.py SCHEMA FILE...: checks each JSON file against a
JSON Schema (draft 7, as the SARIF 2.1.0 schema is) with python3-jsonschema.
Prints every violation with where it is; exits 1 if any file has one."""
import json
import sys

import jsonschema


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.draft7_format_checker)
    bad = 0
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            print(f"{path}: {where}: {err.message}")
            bad += 1
    sys.exit(1 if bad else 0)


main()
