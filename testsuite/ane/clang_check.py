#!/usr/bin/python3
"""The ane backend's sources through clang, as a Mac compiles them.

CI's clang tree (scripts/fuzz.sh) skips runtime/ane/ (it finds no objc
headers), and a Mac builds with clang: so each source of runtime/ane/ and
the stand-in's C files are compiled here with clang -fsyntax-only and the
exact flags meson gave gcc (from compile_commands.json), against GNU's
objc headers (found beside gcc's own), once as on Linux and once with
__APPLE__ defined against testsuite/ane/macos-sdk/. Any diagnostic fails.

    clang_check.py BUILD_DIR SOURCE_DIR
Exit 77 (skipped) without clang or GNU's objc headers, except under CI=true.
"""
import json, os, shlex, shutil, subprocess, sys, tempfile

build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ci = os.environ.get("CI") == "true"


def skip(why):
    print(f"clang-check: {why}", file=sys.stderr)
    sys.exit(1 if ci else 77)


clang = shutil.which("clang")
if not clang:
    skip("no clang")
gcc = subprocess.run(["gcc", "-print-file-name=include"], capture_output=True, text=True).stdout.strip()
objc = os.path.join(gcc, "objc")
if not os.path.isfile(os.path.join(objc, "runtime.h")):
    skip(f"no GNU objc headers in {gcc}")
# Only objc/ from gcc's directory: its other headers (stdatomic.h, ...) are gcc's own, not clang's.
shim = tempfile.mkdtemp(prefix="orion-clang-check-")
os.symlink(objc, os.path.join(shim, "objc"))
sdk = os.path.join(source, "testsuite", "ane", "macos-sdk")

with open(os.path.join(build, "compile_commands.json")) as f:
    commands = json.load(f)
seen, failed = set(), 0
for entry in commands:
    path = entry["file"]
    norm = os.path.normpath(os.path.join(entry["directory"], path))
    rel = os.path.relpath(norm, source)
    ours = rel.startswith("runtime/ane/") or (rel.startswith("testsuite/ane/standin") and rel.endswith(".c"))
    if not ours:  # (the macOS compile check's entries name the same files: their flags are dropped below)
        continue
    for apple in (False, True) if rel.startswith("runtime/ane/") else (False,):
        if (rel, apple) in seen:
            continue
        seen.add((rel, apple))
        args, out, drop = shlex.split(entry["command"]), [clang], False
        for a in args[1:]:
            if drop:
                drop = False
            elif a in ("-o", "-MF", "-MQ"):
                drop = True
            elif a in ("-MD", "-c", "-D__APPLE__=1", "-D_DARWIN_C_SOURCE") or a.startswith(
                    ("-fdiagnostics-color", "-fvect-cost-model", "-I../testsuite/ane/macos-sdk")):
                pass
            else:
                out.append(a)
        src = out.pop()
        out += ["-fsyntax-only", "-fno-color-diagnostics", "-isystem", shim]
        if apple:
            out += ["-D__APPLE__=1", "-D_DARWIN_C_SOURCE", "-I" + sdk]
        r = subprocess.run(out + [src], cwd=entry["directory"], capture_output=True, text=True)
        if r.returncode or r.stderr.strip():
            failed += 1
            print(f"clang-check: {rel}{' (__APPLE__)' if apple else ''}:\n{r.stderr}", file=sys.stderr)
shutil.rmtree(shim)
print(f"clang-check: {len(seen)} compiles, {failed} with diagnostics")
if not seen:
    skip("no runtime/ane sources in compile_commands.json")
sys.exit(1 if failed else 0)
