#!/usr/bin/env python3
"""code_shape: checks the shape rules of the control plane and the daemons' entry points.

  - no source file in gateway/ or coordinator/ is longer than 600 lines;
  - no function there is longer than 80 lines (test bodies excepted: *_test.cc);
  - main() of every daemon (gateway, cache node, data node, ringcache-local) is a page: at most
    60 lines.

Functions are found without a compiler: comments, strings and character literals are blanked,
then a `{` at namespace or class level whose head (the text since the previous `;`, `{` or `}`)
has a parameter list and is not a control statement, namespace, class or initializer opens a
function; its length runs from the head's first line to the matching `}`. Lambdas and local
classes count toward the function that holds them.

Usage: code_shape.py [--root DIR] [--list N]   (--list N prints every function over N lines)
Exit status: 0 when every rule holds, 1 otherwise (each breach printed as path:line: message).
"""
import argparse
import os
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_MAIN_LINES = 60
SHAPED_DIRS = ("gateway", "coordinator")
DAEMON_MAINS = ("gateway/main.cc", "cachenode/main.cc", "datanode/main.cc",
                "tools/local/ringcache_local.cc")

CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b")


def blank(src):
    """Returns `src` with comments and literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            if not m:
                out.append(src[i])
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src[i] in "\"'":
            # A digit separator (1'000) is no character literal.
            if src[i] == "'" and i > 0 and src[i - 1].isalnum() and i + 1 < n and src[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            q, j = src[i], i + 1
            while j < n and src[j] != q and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(q + " " * (j - i - 1) + q)
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def functions(path):
    """Yields (first line, last line, name) of every function defined in `path`."""
    with open(path, encoding="utf-8") as f:
        text = blank(f.read())
    # Preprocessor lines are no part of a head.
    text = re.sub(r"(?m)^[ \t]*#.*$", lambda m: " " * len(m.group(0)), text)
    stack, last = [], 0  # stack of (kind, first line, head)
    for m in re.finditer(r"[{};]", text):
        ch, pos = m.group(), m.start()
        at_scope = all(kind in ("namespace", "class") for kind, _, _ in stack)
        if ch == ";":
            if at_scope:
                last = pos + 1
            continue
        if ch == "{":
            if at_scope:
                head = text[last:pos]
                flat = " ".join(head.split())
                if "(" not in flat and re.search(r"\b(namespace|extern)\b", flat):
                    kind = "namespace"
                elif "(" not in flat and re.search(r"\b(class|struct|union|enum)\b", flat):
                    kind = "class"
                elif "(" in flat and not CONTROL.match(flat) and not flat.endswith("="):
                    kind = "function"
                else:
                    kind = "other"
                skipped = len(head) - len(head.lstrip())
                first = text.count("\n", 0, last + skipped) + 1
                stack.append((kind, first, flat))
            else:
                stack.append(("inner", 0, ""))
            last = pos + 1
            continue
        if not stack:
            continue
        kind, first, flat = stack.pop()
        if kind == "function":
            names = re.findall(r"([~\w:]+(?:<[^()]*>)?)\s*\(", flat)
            yield first, text.count("\n", 0, pos) + 1, names[0] if names else flat[:40]
        if all(k in ("namespace", "class") for k, _, _ in stack):
            last = pos + 1


def sources(root):
    for top in SHAPED_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith((".cc", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--list", type=int, default=0, metavar="N")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    breaches = []
    for rel in sources(root):
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            lines = f.read().count("\n")
        if lines > MAX_FILE_LINES:
            breaches.append(f"{rel}:1: {lines} lines (at most {MAX_FILE_LINES})")
        for first, last, name in functions(path):
            length = last - first + 1
            if args.list and length > args.list:
                print(f"{length:5d} {rel}:{first} {name}")
            if length > MAX_FUNCTION_LINES and not rel.endswith("_test.cc"):
                breaches.append(f"{rel}:{first}: {name} has {length} lines "
                                f"(at most {MAX_FUNCTION_LINES})")
    for rel in DAEMON_MAINS:
        path = os.path.join(root, rel)
        mains = [(f, l) for f, l, name in functions(path) if name == "main"]
        if len(mains) != 1:
            breaches.append(f"{rel}:1: expected one main(), found {len(mains)}")
            continue
        first, last = mains[0]
        if last - first + 1 > MAX_MAIN_LINES:
            breaches.append(f"{rel}:{first}: main() has {last - first + 1} lines "
                            f"(at most {MAX_MAIN_LINES}: a page)")
    for b in breaches:
        print(b)
    if not breaches:
        print(f"code shape: ok ({len(list(sources(root)))} files in {', '.join(SHAPED_DIRS)}; "
              f"{len(DAEMON_MAINS)} daemon mains)")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
