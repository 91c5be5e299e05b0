#!/usr/bin/env bash
# Every kernel object holds only its own tier's instructions (ops/CMakeLists.txt gives each tier
# exactly its own -m flags): baseline objects no VEX/EVEX code, *_avx2 no AVX-512 (zmm, opmasks,
# xmm/ymm16-31), *_avx512 no VNNI/BF16/AMX, *_avx512vnni no BF16/AMX, *_avx512bf16 no VNNI/AMX. A VNNI instruction in a
# plain AVX-512 object would fault on CPUs with AVX-512 but no VNNI (Skylake-SP), and nothing else
# would notice on a machine that has VNNI.
#
#   tests/check_isa_tiers.sh path/to/libpacer_ops.a
set -euo pipefail
lib=$1
command -v objdump >/dev/null || { echo "objdump (binutils) not found"; exit 1; }

# objdump prints "member.o:     file format ..." before each member's code, then one line per
# instruction: "  addr:<TAB>mnemonic operands  # comment" with symbol names in <...>.
objdump -d --no-show-raw-insn "$lib" | awk '
  function tier_of(m) {
    if (m ~ /_avx2\.cpp\.o$/) return "avx2"
    if (m ~ /_avx512\.cpp\.o$/) return "avx512"
    if (m ~ /_avx512vnni\.cpp\.o$/) return "avx512vnni"
    if (m ~ /_avx512bf16\.cpp\.o$/) return "avx512bf16"
    if (m ~ /_amx\.cpp\.o$/) return "amx"
    return "baseline"
  }
  function report(what) {
    if (shown[member]++ < 3) printf "FAIL: %s (%s tier): %s\n", member, tier, what
    fail = 1
  }
  /^[^ \t].*\.o:[ \t]+file format/ {
    member = $1; sub(/:$/, "", member); tier = tier_of(member); seen[tier]++; next
  }
  /^[ \t]+[0-9a-f]+:\t/ {
    if (member == "") next
    line = $0
    sub(/^[ \t]+[0-9a-f]+:\t/, "", line)  # the instruction text
    sub(/[ \t]*#.*$/, "", line)           # objdump comments
    gsub(/<[^>]*>/, "", line)              # symbol names
    split(line, parts, /[ \t]+/)
    mn = parts[1]
    ops = substr(line, length(mn) + 1)
    vnni = (mn ~ /^(\{vex\})?vpdp(busd|busds|wssd|wssds)$/)
    bf16 = (mn ~ /^(vdpbf16ps|vcvtne2ps2bf16|vcvtneps2bf16)$/)
    amx = (mn ~ /^(tdpb[a-z]*|tile[a-z]*|ldtilecfg|sttilecfg)$/)
    evex_regs = (ops ~ /%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])/)
    if (tier == "avx512vnni" && vnni) vnni_seen = 1
    if (tier == "avx512bf16" && bf16) bf16_seen = 1
    if (tier == "baseline" && (mn ~ /^v/ || ops ~ /%[yz]mm/)) report("VEX/EVEX code: " line)
    else if (tier == "avx2" && (evex_regs || vnni || bf16 || amx)) report("AVX-512 code: " line)
    else if (tier == "avx512" && (vnni || bf16 || amx)) report("VNNI/BF16/AMX code: " line)
    else if (tier == "avx512vnni" && (bf16 || amx)) report("BF16/AMX code: " line)
    else if (tier == "avx512bf16" && (vnni || amx)) report("VNNI/AMX code: " line)
  }
  END {
    split("baseline avx2 avx512 avx512vnni avx512bf16", need, " ")
    for (i = 1; i <= 5; i++)
      if (!seen[need[i]]) { printf "FAIL: no %s object (the check would pass vacuously)\n", need[i]; fail = 1 }
    if (!vnni_seen) { print "FAIL: no VNNI instruction in any *_avx512vnni object: the disassembly was not read right"; fail = 1 }
    if (!bf16_seen) { print "FAIL: no BF16 instruction in any *_avx512bf16 object: the disassembly was not read right"; fail = 1 }
    printf "objects per tier: baseline %d, avx2 %d, avx512 %d, avx512vnni %d, avx512bf16 %d, amx %d\n", seen["baseline"], seen["avx2"], seen["avx512"], seen["avx512vnni"], seen["avx512bf16"], seen["amx"]
    exit fail
  }'
