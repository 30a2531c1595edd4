"""Clip-User: the experiments (:mod:`.experiments`) and their figures (:mod:`.plots`); spec
``user_level_clip.md`` §5."""
