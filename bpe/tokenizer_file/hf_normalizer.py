"""Unicode NFC exactly as Hugging Face ``tokenizers`` applies it (a tokenizer.json's
``"normalizer": {"type": "NFC"}``).

``tokenizers`` normalizes with the Unicode 9.0 tables of its normalization crate;
Python's ``unicodedata`` has a newer version. Normalization is stable for code
points both versions assign, so the two differ only at code points that
normalize non-trivially in Python's tables (a combining class, a canonical
decomposition, or a part of a canonical composition) and are unassigned in 9.0.
For ``tokenizers`` those are plain characters: nothing reorders or composes across
them. ``nfc`` therefore cuts the text at them and normalizes the parts between
with ``unicodedata``. ``UNICODE_9_NORMALIZING`` lists the code points that
normalize non-trivially in Unicode 9.0, as ``tokenizers`` does it
(tests/bpe/test_hf_tokenizers.py checks it code point by code point against
``tokenizers``); the ones Python's tables add to them are found once per process.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex

# Code points with a combining class, a canonical decomposition, or in a canonical
# composition in Unicode 9.0 (hexadecimal, ranges inclusive).
UNICODE_9_NORMALIZING = (
    "003C-003E 0041-0050 0052-005A 0061-0070 0072-007A 00A8 00C0-00CF 00D1-00D6 00D8-00DD 00E0-00EF "
    "00F1-00F6 00F8-00FD 00FF-010F 0112-0125 0128-0130 0134-0137 0139-013E 0143-0148 014C-0151 "
    "0154-0165 0168-017F 01A0-01A1 01AF-01B0 01B7 01CD-01DC 01DE-01E3 01E6-01F0 01F4-01F5 01F8-021B "
    "021E-021F 0226-0233 0292 0300-034E 0350-036F 0374 037E 0385-038A 038C 038E-0391 0395 0397 0399 "
    "039F 03A1 03A5 03A9-03B1 03B5 03B7 03B9 03BF 03C1 03C5 03C9-03CE 03D2-03D4 0400-0401 0403 "
    "0406-0407 040C-040E 0410 0413 0415-041A 041E 0423 0427 042B 042D 0430 0433 0435-043A 043E 0443 "
    "0447 044B 044D 0450-0451 0453 0456-0457 045C-045E 0474-0477 0483-0487 04C1-04C2 04D0-04D3 "
    "04D6-04DF 04E2-04F5 04F8-04F9 0591-05BD 05BF 05C1-05C2 05C4-05C5 05C7 0610-061A 0622-0627 0648 "
    "064A-065F 0670 06C0-06C2 06D2-06D3 06D5-06DC 06DF-06E4 06E7-06E8 06EA-06ED 0711 0730-074A "
    "07EB-07F3 0816-0819 081B-0823 0825-0827 0829-082D 0859-085B 08D4-08E1 08E3-08FF 0928-0929 "
    "0930-0931 0933-0934 093C 094D 0951-0954 0958-095F 09BC 09BE 09C7 09CB-09CD 09D7 09DC-09DD 09DF "
    "0A33 0A36 0A3C 0A4D 0A59-0A5B 0A5E 0ABC 0ACD 0B3C 0B3E 0B47-0B48 0B4B-0B4D 0B56-0B57 0B5C-0B5D "
    "0B92 0B94 0BBE 0BC6-0BC7 0BCA-0BCD 0BD7 0C46 0C48 0C4D 0C55-0C56 0CBC 0CBF-0CC0 0CC2 0CC6-0CC8 "
    "0CCA-0CCB 0CCD 0CD5-0CD6 0D3E 0D46-0D47 0D4A-0D4D 0D57 0DCA 0DCF 0DD9-0DDA 0DDC-0DDF 0E38-0E3A "
    "0E48-0E4B 0EB8-0EB9 0EC8-0ECB 0F18-0F19 0F35 0F37 0F39 0F43 0F4D 0F52 0F57 0F5C 0F69 0F71-0F76 "
    "0F78 0F7A-0F7D 0F80-0F84 0F86-0F87 0F93 0F9D 0FA2 0FA7 0FAC 0FB9 0FC6 1025-1026 102E 1037 "
    "1039-103A 108D 135D-135F 1714 1734 17D2 17DD 18A9 1939-193B 1A17-1A18 1A60 1A75-1A7C 1A7F "
    "1AB0-1ABD 1B05-1B0E 1B11-1B12 1B34-1B35 1B3A-1B44 1B6B-1B73 1BAA-1BAB 1BE6 1BF2-1BF3 1C37 "
    "1CD0-1CD2 1CD4-1CE0 1CE2-1CE8 1CED 1CF4 1CF8-1CF9 1DC0-1DF5 1DFB-1E99 1E9B 1EA0-1EF9 1F00-1F15 "
    "1F18-1F1D 1F20-1F45 1F48-1F4D 1F50-1F57 1F59 1F5B 1F5D 1F5F-1F7D 1F80-1FB4 1FB6-1FBC 1FBE-1FBF "
    "1FC1-1FC4 1FC6-1FD3 1FD6-1FDB 1FDD-1FEF 1FF2-1FF4 1FF6-1FFE 2000-2001 20D0-20DC 20E1 20E5-20F0 "
    "2126 212A-212B 2190 2192 2194 219A-219B 21AE 21CD-21D0 21D2 21D4 2203-2204 2208-2209 220B-220C "
    "2223-2226 223C 2241 2243-2245 2247-2249 224D 2260-2262 2264-2265 226D-227D 2280-2289 2291-2292 "
    "22A2 22A8-22A9 22AB-22AF 22B2-22B5 22E0-22E3 22EA-22ED 2329-232A 2ADC 2CEF-2CF1 2D7F 2DE0-2DFF "
    "302A-302F 3046 304B-3062 3064-3069 306F-307D 3094 3099-309A 309D-309E 30A6 30AB-30C2 30C4-30C9 "
    "30CF-30DD 30EF-30F2 30F4 30F7-30FA 30FD-30FE A66F A674-A67D A69E-A69F A6F0-A6F1 A806 A8C4 "
    "A8E0-A8F1 A92B-A92D A953 A9B3 A9C0 AAB0 AAB2-AAB4 AAB7-AAB8 AABE-AABF AAC1 AAF6 ABED F900-FA0D "
    "FA10 FA12 FA15-FA1E FA20 FA22 FA25-FA26 FA2A-FA6D FA70-FAD9 FB1D-FB1F FB2A-FB36 FB38-FB3C FB3E "
    "FB40-FB41 FB43-FB44 FB46-FB4E FE20-FE2F 101FD 102E0 10376-1037A 10A0D 10A0F 10A38-10A3A 10A3F "
    "10AE5-10AE6 11046 1107F 11099-1109C 110A5 110AB 110B9-110BA 11100-11102 11127 1112E-1112F "
    "11131-11134 11173 111C0 111CA 11235-11236 112E9-112EA 1133C 1133E 11347 1134B-1134D 11357 "
    "11366-1136C 11370-11374 11442 11446 114B0 114B9-114BE 114C2-114C3 115AF 115B8-115BB 115BF-115C0 "
    "1163F 116B6-116B7 1172B 11C3F 16AF0-16AF4 16B30-16B36 1BC9E 1D15E-1D169 1D16D-1D172 1D17B-1D182 "
    "1D185-1D18B 1D1AA-1D1AD 1D1BB-1D1C0 1D242-1D244 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024 "
    "1E026-1E02A 1E8D0-1E8D6 1E944-1E94A 2F800-2FA1D "
)
# Where code points that normalize can be: planes 0-3 and plane 14 (planes 4-13
# are unassigned, 15-16 private use).
_SCANNED = (range(0, 0x40000), range(0xE0000, 0xF0000))


def normalizes(code_point: int) -> bool:
    """Whether NFC can change or be changed by this code point, by Python's tables."""
    char = chr(code_point)
    if unicodedata.combining(char):
        return True
    decomposition = unicodedata.decomposition(char)
    return bool(decomposition) and not decomposition.startswith("<")


@lru_cache(maxsize=None)
def newer_than_9() -> frozenset[int]:
    """The code points that normalize by Python's tables and not by Unicode 9.0's."""
    known: set[int] = set()
    for item in UNICODE_9_NORMALIZING.split():
        first, _, last = item.partition("-")
        known.update(range(int(first, 16), int(last or first, 16) + 1))
    found: set[int] = set()
    for scanned in _SCANNED:
        for code_point in scanned:
            if not normalizes(code_point):
                continue
            found.add(code_point)
            parts = [int(part, 16) for part in unicodedata.decomposition(chr(code_point)).split()]
            if len(parts) == 2 and unicodedata.normalize("NFC", "".join(map(chr, parts))) == chr(code_point):
                found.update(parts)  # a composition: its parts normalize too
    return frozenset(found - known)


@lru_cache(maxsize=None)
def _cut() -> "regex.Pattern[str]":
    newer = sorted(newer_than_9())
    if not newer:
        return regex.compile(r"(?!)")
    return regex.compile("[" + "".join(regex.escape(chr(c)) for c in newer) + "]")


def nfc(text: str) -> str:
    """``text`` in NFC as ``tokenizers`` normalizes it; lone surrogates stay as they are.

    Text that is NFC by Python's tables is NFC by ``tokenizers``' too (every
    part of it between the cut code points is NFC), so it is returned as it is.
    """
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    parts = []
    start = 0
    for match in _cut().finditer(text):
        parts += (unicodedata.normalize("NFC", text[start : match.start()]), match.group())
        start = match.end()
    parts.append(unicodedata.normalize("NFC", text[start:]))
    return "".join(parts)
