#!/usr/bin/python3
"""validate_events.py SCHEMA FILE...: every line of each FILE (JSON lines) against the JSON Schema.
Prints "TYPE ok" per event type seen, and each failure with its line; exits 1 on any."""
import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
seen, bad = {}, 0
for path in sys.argv[2:]:
    for n, line in enumerate(open(path), 1):
        doc = json.loads(line)
        errors = list(validator.iter_errors(doc))
        kind = doc.get("type", "?") if isinstance(doc, dict) else "array"
        if errors:
            bad += 1
            best = jsonschema.exceptions.best_match(errors)
            print("%s:%d: %s: %s at %s" % (path, n, kind, best.message, "/".join(map(str, best.absolute_path))))
        else:
            seen[kind] = seen.get(kind, 0) + 1
for kind in sorted(seen):
    print("%s ok (%d)" % (kind, seen[kind]))
sys.exit(1 if bad else 0)
