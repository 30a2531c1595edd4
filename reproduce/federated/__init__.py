"""The federated paper: Tables 2-7 by recipe R (:mod:`.experiments`), the figure
(:mod:`.plots`) and the markdown report (:mod:`.report`); spec ``federated_secagg.md`` §6."""
