"""User-level DP with Clip-User (Rameshwar & Tandon; spec ``user_level_clip.md``).

Public names, kept stable for users: the closed forms ``T``, ``delta_mu``, ``delta_var``,
``bias_mu``, ``bias_var``, ``grid_error`` (spec §2.7), :func:`clip_user` (§3.1) and
:class:`UserLevelATE`, a :class:`dpcausal.contract.Mechanism` whose ``fit`` returns a
:class:`UserLevelOutput` (a :class:`dpcausal.contract.Release`).
"""

from dpcausal.contract import renamed_names
from dpcausal.noise import laplace_mechanism, sample_discrete_laplace
from dpcausal.user_level.ate import derive_ate
from dpcausal.user_level.clip_user import ClipUserInvariantError, ClipUserResult, clip_user
from dpcausal.user_level.closed_forms import T, bias_mu, bias_var, delta_mu, delta_var, grid_error
from dpcausal.user_level.generators import (
    make_itms_like,
    make_user_level_panel,
    make_user_level_synthetic,
)
from dpcausal.user_level.occupancy import as_occupancy, occupancy_hash
from dpcausal.user_level.output import UserLevelOutput
from dpcausal.user_level.plan import UserLevelFacts, UserLevelPlan
from dpcausal.user_level.pseudo_user import PseudoUserResult, pseudo_user
from dpcausal.user_level.release import UserLevelATE

__all__ = [
    "T", "delta_mu", "delta_var", "bias_mu", "bias_var", "grid_error",
    "clip_user", "ClipUserResult", "ClipUserInvariantError", "pseudo_user", "PseudoUserResult",
    "UserLevelATE", "UserLevelPlan", "UserLevelOutput", "UserLevelFacts", "derive_ate",
    "laplace_mechanism", "sample_discrete_laplace", "as_occupancy", "occupancy_hash",
    "make_user_level_synthetic", "make_itms_like", "make_user_level_panel",
]

# the names before issue 27 §5, for one release
__getattr__ = renamed_names(__name__, {"UserLevelRelease": "UserLevelATE"})
