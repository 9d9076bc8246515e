#!/usr/bin/env python3
"""validate_json.py SCHEMA DOC - validate a memlens JSON document.

Uses the jsonschema package (Debian: python3-jsonschema) when it is there,
and always also a small built-in validator for the draft-07 keywords the
memlens schemas use, so the check runs on a bare python3 too. Exit 0 when
valid, 1 with the errors on stderr otherwise.
"""
import json
import sys


def _type_ok(v, t):
    if isinstance(t, list):
        return any(_type_ok(v, x) for x in t)
    return {
        "object": lambda: isinstance(v, dict),
        "array": lambda: isinstance(v, list),
        "string": lambda: isinstance(v, str),
        "integer": lambda: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda: isinstance(v, bool),
        "null": lambda: v is None,
    }[t]()


def mini_validate(root, schema, doc, path="$", errors=None):
    if errors is None:
        errors = []
    if len(errors) > 50:
        return errors
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/"), ref
        target = root
        for part in ref[2:].split("/"):
            target = target[part]
        mini_validate(root, target, doc, path, errors)
    if "type" in schema and not _type_ok(doc, schema["type"]):
        errors.append("%s: %r is not of type %s" % (path, doc, schema["type"]))
        return errors
    if "const" in schema and doc != schema["const"]:
        errors.append("%s: %r is not %r" % (path, doc, schema["const"]))
    if "enum" in schema and doc not in schema["enum"]:
        errors.append("%s: %r is not one of %s" % (path, doc, schema["enum"]))
    if isinstance(doc, (int, float)) and not isinstance(doc, bool):
        if "minimum" in schema and doc < schema["minimum"]:
            errors.append("%s: %r < minimum %r" % (path, doc, schema["minimum"]))
        if "maximum" in schema and doc > schema["maximum"]:
            errors.append("%s: %r > maximum %r" % (path, doc, schema["maximum"]))
    if isinstance(doc, dict):
        for k in schema.get("required", []):
            if k not in doc:
                errors.append("%s: required key %r is missing" % (path, k))
        props = schema.get("properties", {})
        for k, v in doc.items():
            if k in props:
                mini_validate(root, props[k], v, "%s.%s" % (path, k), errors)
            elif isinstance(schema.get("additionalProperties"), dict):
                mini_validate(root, schema["additionalProperties"], v, "%s.%s" % (path, k), errors)
            elif schema.get("additionalProperties") is False:
                errors.append("%s: unexpected key %r" % (path, k))
    if isinstance(doc, list):
        if "minItems" in schema and len(doc) < schema["minItems"]:
            errors.append("%s: fewer than %d items" % (path, schema["minItems"]))
        if "maxItems" in schema and len(doc) > schema["maxItems"]:
            errors.append("%s: more than %d items" % (path, schema["maxItems"]))
        if "items" in schema:
            for i, v in enumerate(doc):
                mini_validate(root, schema["items"], v, "%s[%d]" % (path, i), errors)
    if "if" in schema:
        if not mini_validate(root, schema["if"], doc, path, []):
            if "then" in schema:
                mini_validate(root, schema["then"], doc, path, errors)
        elif "else" in schema:
            mini_validate(root, schema["else"], doc, path, errors)
    return errors


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    with open(sys.argv[2], "rb") as f:
        doc = json.loads(f.read().decode("utf-8"))  # strict: the document must be UTF-8
    errors = mini_validate(schema, schema, doc)
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        jsonschema = None
    if jsonschema is not None:
        v = jsonschema.Draft7Validator(schema)
        for e in sorted(v.iter_errors(doc), key=lambda e: list(e.path))[:50]:
            errors.append("jsonschema: %s: %s" % ("/".join(map(str, e.path)), e.message))
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
