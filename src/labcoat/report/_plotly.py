"""plotly.js and the figures in a page: the bundle and the shared template once per page.

A self-contained report carries plotly.js (4.8 MB) gzipped and base64-encoded (2.0 MB)
and unpacks it in the browser with `DecompressionStream` (Chrome 80, Firefox 113,
Safari 16.4), so the file still opens offline, with no CDN. Figures are queued until the
bundle is ready: each figure's script is `labcoat.plot(function (Plotly) {
Plotly.newPlot(id, data, layout, config) })`, whose `Plotly` adds the page's template
(plotly_white, 7 kB) to the layout, so no figure repeats it. A page that loads plotly.js
from a URL (the dashboard) starts drawing at once.
"""

from __future__ import annotations

import base64
import gzip
import json
from functools import cache
from html import escape
from typing import Any

from labcoat.errors import LabcoatError

INSTALL_HINT = "pip install 'labcoat[ui]'"
BUNDLE_ID = "labcoat-plotly"  # the <script> element holding the packed bundle
CONFIG = {"displaylogo": False, "responsive": True}

# The page's figure queue; `labcoat.start()` draws what waits and everything after.
RUNTIME = """window.labcoat = (function () {
  var queue = [], ready = false, template = TEMPLATE;
  var withTemplate = {newPlot: function (id, data, layout, config) {
    if (!layout.template) layout.template = template;
    return window.Plotly.newPlot(id, data, layout, config);
  }};
  function draw(plot) { plot(withTemplate); }
  return {
    plot: function (plot) { if (ready) draw(plot); else queue.push(plot); },
    start: function () { ready = true; queue.splice(0).forEach(draw); },
    fail: function (why) {
      document.querySelectorAll(".plotly-graph-div").forEach(function (div) {
        div.textContent = why; div.className = "warning"; div.style.height = "auto";
      });
    }
  };
})();"""

# Unpacks the bundle of the element BUNDLE_ID, runs it, then draws the queued figures.
UNPACK = """(function () {
  if (!window.DecompressionStream) {
    labcoat.fail("The plots need a browser with DecompressionStream (Chrome 80, Firefox " +
                 "113, Safari 16.4 or later); the numbers above and below are complete.");
    return;
  }
  var packed = atob(document.getElementById("BUNDLE_ID").textContent);
  var bytes = new Uint8Array(packed.length);
  for (var i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(stream).text().then(function (js) {
    var script = document.createElement("script");
    script.textContent = js;
    document.head.appendChild(script);
    labcoat.start();
  }).catch(function (e) { labcoat.fail("plotly.js could not be unpacked: " + e); });
})();""".replace("BUNDLE_ID", BUNDLE_ID)


def plotly_js() -> str:
    """Plotly's JavaScript bundle (about 4.8 MB), from the `plotly` package."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise LabcoatError(f"the HTML report needs plotly, which is not installed; install it "
                           f"with: {INSTALL_HINT}") from None
    return get_plotlyjs()


@cache
def packed_plotly_js() -> str:
    """plotly.js gzipped (mtime 0: the same bytes each time) and base64-encoded: about
    2.0 MB instead of 4.8 MB. Cached: compressing takes about 0.4 s."""
    packed = gzip.compress(plotly_js().encode("utf-8"), compresslevel=9, mtime=0)
    return base64.b64encode(packed).decode("ascii")


@cache
def template_json(name: str = "plotly_white") -> str:
    import plotly.io as pio
    from plotly.io.json import to_json_plotly

    return to_json_plotly(pio.templates[name].to_plotly_json())


def head_scripts(plotly_src: str | None) -> str:
    """The queue, and plotly.js itself when it comes from a URL (then drawing starts as
    soon as each figure's script runs)."""
    runtime = f"<script>{RUNTIME.replace('TEMPLATE', template_json(), 1)}</script>"
    if plotly_src is None:
        return runtime
    return (runtime + f'<script src="{escape(plotly_src)}"></script>'
            "<script>labcoat.start()</script>")


@cache
def bundle_notice() -> str:
    """The bundle's own header (version, copyright, MIT license), kept readable outside
    the packed bytes: "plotly.js v4.1.1 | Copyright 2012-2026, Plotly, Inc. | ..."."""
    js = plotly_js()
    header = js[js.index("/**") + 3:js.index("*/")] if js.startswith("/**") else ""
    lines = [line.strip(" *") for line in header.splitlines()]
    return " | ".join(line for line in lines if line)


def tail_scripts(plotly_src: str | None) -> str:
    """The packed bundle and its unpacker, at the end of the body: the text shows first."""
    if plotly_src is not None:
        return ""
    notice = escape(bundle_notice()).replace("--", "- -")
    return (f"<!-- {notice}; packed below: gzip, base64 -->"
            f"<script type='application/octet-stream' id='{BUNDLE_ID}'>"
            f"{packed_plotly_js()}</script><script>{UNPACK}</script>")


def figure_div(fig: Any, div_id: str) -> str:
    """A figure's div and the script that queues it. The layout's template is left out
    when it is the page's (the queue adds it); Plotly's JSON escapes "<", so no label
    can close the script."""
    from plotly.io.json import to_json_plotly

    spec = fig.to_plotly_json()
    layout = dict(spec.get("layout", {}))
    if to_json_plotly(layout.get("template", {})) == template_json():
        layout.pop("template")
    height = layout.get("height", 380)
    return (f"<div class='figure'><div id='{div_id}' class='plotly-graph-div' "
            f"style='height:{int(height)}px; width:100%;'></div><script>labcoat.plot("
            f"function (Plotly) {{ Plotly.newPlot(\"{div_id}\", "
            f"{to_json_plotly(spec.get('data', []))}, {to_json_plotly(layout)}, "
            f"{json.dumps(CONFIG)}) }})</script></div>")
