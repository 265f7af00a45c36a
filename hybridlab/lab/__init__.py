"""The instruments' models: plain Python under every drawing and widget of the course.

What this package holds
-----------------------
Each instrument of the lessons is a *model* (state, actions, every number it shows) and
a *view* (a drawing or a widget). The models live here; ``hybridlab.viz`` holds only
the views. A model never imports matplotlib, ipywidgets or graphviz (a test imports this
package with those modules blocked), so it is tested by pytest alone and can serve a new
view without change.

* :mod:`~hybridlab.lab.graphs` -- anything drawable as a graph IR, operator kinds;
* :mod:`~hybridlab.lab.schedule` -- the list scheduler, work, span and bounds, task graphs,
  devices and streams (the schedule explorer's model);
* :mod:`~hybridlab.lab.queue` -- the lazy-evaluation queue stepper's model;
* :mod:`~hybridlab.lab.memory` -- the memory timeline (where the planner put each result);
* :mod:`~hybridlab.lab.passes` -- the pass pipeline's stages, recorded for the pass explorer;
* :mod:`~hybridlab.lab.timing` -- what hybridize saves (speed-ups) and where a call's time
  goes (the breakdown), measured under one protocol.
"""
