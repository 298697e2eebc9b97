"""report_check.py - checks of a `dtrun report` page, for tests/cli/test_report.sh.

  report_check.py page PAGE          the page is well-formed XML (XHTML markup), has no script and
                                     names nothing to fetch; prints its charts' ids
  report_check.py marks PAGE PNG     every chart of the page's manifest has marks in the screenshot:
                                     colored pixels inside its plot box (axes, grid, text and rules
                                     are grey, marks saturated); names each chart without
  report_check.py blank PAGE ID OUT  OUT is PAGE with the marks of chart ID taken out (its frame,
                                     axes and legend kept): the page `marks` must refuse

Exit status 0 when the check passes, 1 with the reasons on stdout otherwise.
"""
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
MIN_MARKED = 12  # colored pixels in a plot box that make it a drawn chart, not stray anti-aliasing


def manifest(text):
    m = re.search(r"<!-- dtrun-report-charts:[^\n]*\n(.*?)-->", text, re.S)
    if not m:
        return None
    charts = []
    for line in m.group(1).splitlines():
        f = line.split()
        charts.append((f[0], *map(int, f[1:])))
    return charts


def check_page(path):
    text = open(path, encoding="utf-8").read()
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        return [f"{path}: not well-formed: {e}"], []
    bad = []
    for el in root.iter():
        tag = el.tag.split("}")[-1]
        if tag in ("script", "link", "img", "iframe", "object", "embed", "image", "use"):
            bad.append(f"{path}: a <{tag}> element")
        for k, v in el.attrib.items():
            if k in ("src", "href") or k.endswith("}href") or "url(" in v:
                bad.append(f"{path}: <{tag} {k}={v!r}> names something to fetch")
    if "url(" in text or "@import" in text:
        bad.append(f"{path}: CSS that fetches")
    charts = manifest(text)
    if charts is None:
        bad.append(f"{path}: no chart manifest")
        return bad, []
    ids = {el.get("id") for el in root.iter(SVG + "svg")}
    for c in charts:
        if c[0] not in ids:
            bad.append(f"{path}: {c[0]} is in the manifest, not in the page")
    return bad, [c[0] for c in charts]


def colored(px):
    r, g, b = px[:3]
    return max(r, g, b) - min(r, g, b) > 40


def check_marks(page, png):
    from PIL import Image

    im = Image.open(png).convert("RGB")
    w, h = im.size
    bad = []
    charts = manifest(open(page, encoding="utf-8").read()) or []
    if not charts:
        bad.append(f"{page}: no charts")
    for cid, left, top, cw, ch, px, py, pw, ph in charts:
        if left + cw > w or top + ch > h:
            bad.append(f"{cid}: outside the screenshot ({w}x{h})")
            continue
        # inside the frame: the frame's own anti-aliased edge is grey anyway
        n = sum(map(colored, im.crop((px + 2, py + 2, px + pw - 2, py + ph - 2)).getdata()))
        if n < MIN_MARKED:
            bad.append(f"{cid}: no marks ({n} colored pixels in its plot box)")
    return bad, len(charts)


def blank(page, cid, out):
    """Take the marks out of one chart: every element of its <svg> drawn in a color of its own."""
    text = open(page, encoding="utf-8").read()
    start = text.index(f'<svg xmlns="http://www.w3.org/2000/svg" id="{cid}"')
    end = text.index("</svg>", start)
    body = text[start:end]
    kept = "\n".join(line for line in body.split("\n") if not re.search(r'(stroke|fill)="#[0-9a-f]{6}"', line))
    open(out, "w", encoding="utf-8").write(text[:start] + kept + text[end:])


def main():
    cmd = sys.argv[1]
    if cmd == "page":
        bad, ids = check_page(sys.argv[2])
        print("\n".join(bad) if bad else " ".join(ids))
        return 1 if bad else 0
    if cmd == "marks":
        bad, n = check_marks(sys.argv[2], sys.argv[3])
        print("\n".join(bad) if bad else f"{n} charts, each with marks")
        return 1 if bad else 0
    if cmd == "blank":
        blank(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
