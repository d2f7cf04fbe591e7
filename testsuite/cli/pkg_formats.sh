#!/usr/bin/env bash
# Package format versions and their weight checksums (docs/package-format.md):
# the committed format-1 package (XXH64, made by orionc before format 2)
# still inspects, verifies, runs to its recorded output and patches, staying
# format 1; what orionc writes now is format 2 with XXH3-64 checksums of the
# same weight file; a checksum that does not match is refused in either
# format with the exact message. Expected checksums were computed with
# Debian's xxhsum (-H1 for XXH64, -H3 for XXH3-64) over the weights' bytes,
# the source's SHA-256 with python3's hashlib.
set -u
orionc=$(realpath "$1")
run=$(realpath "$2")
inspect=$(realpath "$3")
make_st="python3 $(realpath "$4")"
fixtures=$(realpath "$5")
. "$(dirname "$0")/lib.sh"
# The checksum the manifest records for weight NAME (the string after its key KEY).
checksum_of() { # checksum_of PKG KEY NAME
  python3 - "$@" <<'PY'
import plistlib, sys
m = plistlib.load(open(sys.argv[1] + "/Manifest.plist", "rb"))
print(m["FormatVersion"], *[w.get(sys.argv[2], "-") for f in m["Functions"] for w in f["Weights"] if w["Name"] == sys.argv[3]])
PY
}
# x = [1, 2, 3, 4]
npy16 '(1, 4)' '\x00\x3c\x00\x40\x00\x42\x00\x44' x.npy

# Format 1, as committed.
cp -r "$fixtures/format1.anepkg" v1.anepkg
check v1-inspect 0 "$inspect" v1.anepkg
contains v1-inspect "format 1, compiled by orionc 0.1.0"
contains v1-inspect "offset 64  32 bytes  xxh64 7510a4e010aaeee4"
contains v1-inspect "checksums: all verified"
check v1-run 0 "$run" v1.anepkg --input x=x.npy --output-dir o1
same_bytes v1-run o1/z.npy "$fixtures/format1.z.npy"
check v1-json 0 "$inspect" --json v1.anepkg
contains v1-json '"xxh64":	"7510a4e010aaeee4"'

# A format-1 patch stays format 1: the new weights get XXH64 checksums.
$make_st new.safetensors w=F32:4x4:0.5,0,0,0,0,0.5,0,0,0,0,0.5,0,0,0,0,0.5 b=F16:4:fill=1
check v1-patch 0 "$run" patch v1.anepkg --weights new.safetensors
contains v1-patch "v1.anepkg: 2 weights patched, 2 blobs (40 bytes) changed, generation 1"
check v1-patched-checksums 0 checksum_of v1.anepkg XXH64 w
contains v1-patched-checksums "1 7204e1f6a2d7b4ea"
check v1-patched-checksums-b 0 checksum_of v1.anepkg XXH64 b
contains v1-patched-checksums-b "1 3b74be7e7b798ead"
if grep -q '<key>XXH3</key>' v1.anepkg/Manifest.plist; then fail "v1-patched: an XXH3 key in a format-1 manifest"; else pass; fi
check v1-patched-inspect 0 "$inspect" v1.anepkg
contains v1-patched-inspect "checksums: all verified"
check v1-patched-run 0 "$run" v1.anepkg --input x=x.npy --output-dir o1p
npy16 '(1, 4)' '\x00\x3e\x00\x40\x00\x41\x00\x42' want.npy # [1.5, 2, 2.5, 3]
same_bytes v1-patched-run o1p/z.npy want.npy

# --verify compares a fresh (format-2) compile's MIL and weight bytes, not manifests: a format-1 package passes.
cp -r "$fixtures/format1.anepkg" v1verify.anepkg
cp "$fixtures/format1.oir" .
check v1-patch-verify 0 "$run" patch v1verify.anepkg --weights new.safetensors --verify
contains v1-patch-verify "v1verify.anepkg: verified: the same MIL and weight bytes as a fresh compile, bit-identical outputs"
check v1-verified-format 0 checksum_of v1verify.anepkg XXH64 w
contains v1-verified-format "1 7204e1f6a2d7b4ea"

# A format-1 weight whose bytes changed fails its XXH64.
cp -r "$fixtures/format1.anepkg" v1bad.anepkg
printf '\x01' | dd of=v1bad.anepkg/weights/weight.bin bs=1 seek=130 conv=notrunc status=none
check v1-flipped 1 "$inspect" v1bad.anepkg
contains v1-flipped "v1bad.anepkg/weights/weight.bin: weight 'w' fails its checksum"
check v1-flipped-run 1 "$run" v1bad.anepkg --input x=x.npy --output-dir o1b
contains v1-flipped-run "v1bad.anepkg/weights/weight.bin: weight 'w' fails its checksum"
# Format 1 names its checksums XXH64: an XXH3 key there is a missing XXH64.
cp -r "$fixtures/format1.anepkg" v1key.anepkg
sed -i 's|<key>XXH64</key>|<key>XXH3</key>|' v1key.anepkg/Manifest.plist
check v1-xxh3-key 1 "$inspect" v1key.anepkg
contains v1-xxh3-key "v1key.anepkg/Manifest.plist:84:11: error: manifest: weight has no 'XXH64'"

# Format 2 from the same source: the same weight file and MIL, XXH3-64 checksums.
check v2-compile 0 "$orionc" --no-lint --no-dedup -o v2.anepkg format1.oir
same_bytes v2-weights v2.anepkg/weights/weight.bin "$fixtures/format1.anepkg/weights/weight.bin"
same_bytes v2-mil v2.anepkg/model.mil "$fixtures/format1.anepkg/model.mil"
check v2-checksums 0 checksum_of v2.anepkg XXH3 w
contains v2-checksums "2 884486de5d833f76"
check v2-checksums-b 0 checksum_of v2.anepkg XXH3 b
contains v2-checksums-b "2 c77b3abb6f87acd9"
# SourceSHA256 (nettle), as python3's hashlib gives it for format1.oir.
if grep -q '<string>448d0a0693a851285384c05f2180c316708df67be76b33cb8678a8b65ebde78b</string>' v2.anepkg/Manifest.plist
then pass; else fail "v2: SourceSHA256 is not hashlib's"; fi
if grep -q '<key>XXH64</key>' v2.anepkg/Manifest.plist; then fail "v2: an XXH64 weight key in a format-2 manifest"; else pass; fi
check v2-inspect 0 "$inspect" v2.anepkg
contains v2-inspect "format 2, compiled by orionc 0.1.0"
contains v2-inspect "offset 64  32 bytes  xxh3 884486de5d833f76"
check v2-run 0 "$run" v2.anepkg --input x=x.npy --output-dir o2
same_bytes v2-run o2/z.npy "$fixtures/format1.z.npy"

# A format-2 checksum flipped (one hex digit) is refused, by every tool.
cp -r v2.anepkg v2bad.anepkg
sed -i 's|<string>884486de5d833f76</string>|<string>884486de5d833f77</string>|' v2bad.anepkg/Manifest.plist
check v2-flipped 1 "$inspect" v2bad.anepkg
contains v2-flipped "v2bad.anepkg/weights/weight.bin: weight 'w' fails its checksum"
contains v2-flipped "checksums: FAILED"
check v2-flipped-run 1 "$run" v2bad.anepkg --input x=x.npy --output-dir o2b
contains v2-flipped-run "v2bad.anepkg/weights/weight.bin: weight 'w' fails its checksum"
if [ -e o2b/z.npy ]; then fail "v2-flipped-run: wrote an output"; else pass; fi
# ... and so is a weight byte flipped under a right checksum.
cp -r v2.anepkg v2data.anepkg
printf '\x01' | dd of=v2data.anepkg/weights/weight.bin bs=1 seek=130 conv=notrunc status=none
check v2-data-flipped 1 "$inspect" v2data.anepkg
contains v2-data-flipped "v2data.anepkg/weights/weight.bin: weight 'w' fails its checksum"

# A format-2 patch stays format 2 with XXH3-64 checksums.
check v2-patch 0 "$run" patch v2.anepkg --weights new.safetensors
check v2-patched-checksums 0 checksum_of v2.anepkg XXH3 w
contains v2-patched-checksums "2 8fab3b15c1efcf23"
check v2-patched-checksums-b 0 checksum_of v2.anepkg XXH3 b
contains v2-patched-checksums-b "2 391324e7cc2ea564"
check v2-patched-run 0 "$run" v2.anepkg --input x=x.npy --output-dir o2p
same_bytes v2-patched-run o2p/z.npy want.npy

# A format the readers do not know.
cp -r v2.anepkg v3.anepkg
sed -i '/<key>FormatVersion<\/key>/{n;s|<integer>2</integer>|<integer>3</integer>|}' v3.anepkg/Manifest.plist
check v3 1 "$inspect" v3.anepkg
contains v3 "v3.anepkg/Manifest.plist:6:5: error: package format version 3 is not supported (this reads versions 1 to 2)"
finish
