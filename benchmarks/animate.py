"""Benchmark: how long `attnmt animate` takes to render each scene at low and high quality.

    python -m benchmarks.animate [--qualities low high] [--scenes bottleneck soft-alignment]
                                 [--study RESULTS.json] [--out PATH]

Each render is the real command (`python -m attnmt animate SCENE --quality Q --out FILE.mp4`) in a
fresh process, so the time includes importing manim and attnmt, preparing the scene's data and
encoding the MP4; one last-frame PNG render per scene is timed as well. Recorded per render: wall
seconds, CPU seconds of the child (user + system), the output's size, resolution and frame count.
Without --study the Bottleneck curve is the built-in demo's (see attnmt.viz.scenes.data).
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import write_result

SCENES = ("bottleneck", "soft-alignment")


def _video_facts(path: Path) -> dict:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        return {"width": stream.codec_context.width, "height": stream.codec_context.height, "frames": frames,
                "seconds_of_video": round(frames / float(stream.average_rate), 2)}


def render(scene: str, quality: str, out: Path, last_frame: bool, study: str | None) -> dict:
    """Run one render in a child process; its wall and CPU time and what it wrote."""
    command = [sys.executable, "-m", "attnmt", "animate", scene, "--quality", quality, "--out", str(out),
               "--overwrite"]
    if last_frame:
        command.append("--last-frame")
    if study and scene == "bottleneck":
        command += ["--study", study]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shown = ["attnmt", *command[3:]]
    result = {"scene": scene, "quality": quality, "output": "png (last frame)" if last_frame else "mp4",
              "command": shlex.join(part.replace(str(out.parent), "OUT") for part in shown),
              "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "bytes": out.stat().st_size}
    if not last_frame:
        result.update(_video_facts(out))
    print(f"{scene:15s} {quality:6s} {result['output']:16s} wall {wall:6.1f} s  cpu {cpu:6.1f} s", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qualities", nargs="+", default=["low", "high"], choices=["low", "medium", "high"])
    parser.add_argument("--scenes", nargs="+", default=list(SCENES), choices=SCENES)
    parser.add_argument("--study", help="results JSON for the Bottleneck curve (default: the built-in demo's)")
    parser.add_argument("--out", help="JSON result path (default benchmarks/results/animate.json)")
    args = parser.parse_args()
    renders = []
    with tempfile.TemporaryDirectory() as tmp:
        for scene in args.scenes:
            renders.append(render(scene, "low", Path(tmp) / f"{scene}.png", True, args.study))
            for quality in args.qualities:
                renders.append(render(scene, quality, Path(tmp) / f"{scene}_{quality}.mp4", False, args.study))
    path = write_result("animate", {
        "what": "wall and CPU seconds of one `attnmt animate` render in a fresh process (imports, data, "
                "rendering, encoding); quality presets: low 854x480 at 15 fps, high 1920x1080 at 60 fps",
        # The curve's numbers are kept with the timings: a --study file may not outlive the run.
        "bottleneck_curve": json.loads(Path(args.study).read_text(encoding="utf-8")) if args.study
        else "built-in demo curve (attnmt/viz/demo_curve.json)",
        "renders": renders,
    }, args.out)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
