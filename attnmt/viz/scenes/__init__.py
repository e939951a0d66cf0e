"""The two manim scenes of the attention chapter, and the plain data and geometry they draw.

* :mod:`.data`: what is animated, measured or computed by a real model (no manim import);
* :mod:`.layout`: where things go on the frame, in scene units (no manim import), so that tests
  can find a cell's pixels from the same numbers the scene used;
* :mod:`.bottleneck` and :mod:`.soft_alignment`: the manim scenes (import manim).

Only :mod:`attnmt.viz.animate` imports the scene modules, and only after checking that manim is
installed, so that the rest of attnmt never needs manim.
"""
