"""TAP and the baselines its paper ranks it against, as drake_bench method plugins.

* ``tap`` (:class:`TAP`): Stage 1's FL copy, personal copy and margin replacement, Stage 2's distillation;
* ``tap-no-kd`` (:class:`TAPNoKD`): the same with beta = 0 (the paper's "No KD" ablation, Tables 4-6);
* ``fedavg-post-train`` (:class:`FedAvgPostTrain`): the FL copy alone, averaged component by component, and the
  final server model post-trained P steps on local data (the paper's "FedAvg + Post-train");
* ``tap-local`` (:class:`TAPLocal`): the personal copy alone, trained on local data only (the paper's "Local").

All four run the same components (:mod:`.keys`) with the same local training (:mod:`.experts`), so a board compares
only what the paper changes. The method page is docs/methods/tap.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np
import torch

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.plugins.protocol import ClientContext, Diagnostic, FederationContext, Message, MethodMeta, State

from ..lora_clients import LoraMethod, average
from .aggregation import aggregate, component_of, view_for
from .config import NoKDSettings, PostTrainSettings, RoundSettings, TAPSettings
from .experts import Copy, ExpertClients
from .history import decide, replace
from .keys import group_by_key, paths
from .memory import PREFIX as MEMORY
from .memory import draw_batches, recall, remember

FL, PERSONAL = "fl", "x"
"""State prefixes of the two copies: ``fl/<component>/<peft key>`` and ``x/<component>/<peft key>``."""

SALT_STAGE2 = 0x7A9
"""Mixed with the run seed and the client into Stage 2's batch draws: the same P batches for the teacher and the
student, whatever else draws random numbers."""

REFERENCE = (
    "Lee, Fang, Han, Hosseinalipour, Brinton, TAP: Two-Stage Adaptive Personalization of Multi-Task and "
    "Multi-Modal Foundation Models in Federated Learning (arXiv 2509.26524)"
)


# ---------------------------------------------------------------------------------------------- state layout
def split_state(tensors: dict[str, torch.Tensor]) -> tuple[Copy, Copy, dict[str, torch.Tensor]]:
    """A State's tensors as (FL copy, personal copy, memory images)."""
    fl: Copy = {}
    personal: Copy = {}
    memory: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if name.startswith(MEMORY):
            memory[name] = t
            continue
        copy, comp, key = name.split("/", 2)
        {FL: fl, PERSONAL: personal}[copy].setdefault(comp, {})[key] = t
    return fl, personal, memory


def join_state(fl: Copy, personal: Copy, memory: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {f"{FL}/{comp}/{k}": t for comp, ts in fl.items() for k, t in ts.items()}
    out.update({f"{PERSONAL}/{comp}/{k}": t for comp, ts in personal.items() for k, t in ts.items()})
    out.update(memory)
    return out


def as_copy(tensors: dict[str, torch.Tensor]) -> Copy:
    """``{"<component>/<peft key>": t}`` (a message) as a copy."""
    out: Copy = {}
    for name, t in tensors.items():
        comp, _, key = name.partition("/")
        out.setdefault(comp, {})[key] = t
    return out


def flat(copy: Copy, comps: Iterable[str]) -> dict[str, torch.Tensor]:
    """The named components of a copy as ``{"<component>/<peft key>": t}`` (what an upload carries)."""
    return {f"{comp}/{k}": t for comp in comps for k, t in copy[comp].items()}


# ---------------------------------------------------------------------------------------------- the entries
class TAPBase(LoraMethod):
    """The round every TAP entry shares: which copies a client keeps decides what it trains, uploads and answers with.

    Subclasses set ``meta``, ``Config``, ``uses_fl`` (an FL copy, trained from the server's components and uploaded)
    and ``uses_personal`` (a personal copy that never leaves the client); with both, the margin replacement runs.
    """

    Config: ClassVar[type[RoundSettings]] = RoundSettings
    uses_fl: ClassVar[bool] = True
    uses_personal: ClassVar[bool] = True

    def __init__(self, config: RoundSettings | None = None):
        self.config = config or self.Config()
        self.clients = ExpertClients(self.config)
        self._rows: dict[int, list[Diagnostic]] = {}  # the server's rows per round, until round_diagnostics
        self._client_rows: dict[
            int, list[Diagnostic]
        ] = {}  # a client's rows of its last update, until client_diagnostics

    @property
    def answers_with(self) -> str:
        """The copy a client is scored with: the personal one where it has one, else the FL copy."""
        return PERSONAL if self.uses_personal else FL

    # -- protocol ----------------------------------------------------------------------------------------------
    def setup(self, federation: FederationContext) -> None:
        super().setup(federation)
        self.federation = federation
        self._rows, self._client_rows = {}, {}

    def init_client(self, ctx: ClientContext) -> State:
        """No tensors: both copies start at the architecture's initialisation of every component (the reference code
        creates the personal copy from the same weights and seed as the FL copy), which the pool holds; histories at
        +inf (absent)."""
        return State(metadata={"h_l": {}, "h_p": {}, "owned": [], "replacements": {}, "rounds": 0, "memory": []})

    def init_server(self) -> State:
        return State(metadata={"owners": {}, "round": 0})

    def margins(self, keys: Iterable[str]) -> dict[str, float]:
        return {k: self.config.margin(k) for k in keys}  # type: ignore[attr-defined]

    def keeps_memory(self, round_idx: int) -> bool:
        """Whether this round's items go into the Stage 2 buffer: with Stage 2 on, in the last rounds that can fill
        it (its capacity over the items a round draws, rounded up, plus one): earlier items would be pushed out by then, and
        the State, checkpointed every round, stays small until they are needed."""
        cfg = self.config
        if not (isinstance(cfg, PostTrainSettings) and cfg.memory_items > 0 and cfg.post_steps > 0):
            return False
        fed = self.federation
        per_round = max(1, fed.local_steps * fed.batch_size)
        return round_idx >= fed.rounds - (math.ceil(cfg.memory_items / per_round) + 1)

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        """A round of the paper's Alg. 1: the FL copy starts from the server's components and trains; it is uploaded;
        every key of the round whose FL history beats the personal one by its margin has its path's components copied
        into the personal copy; the personal copy trains on the same batches (the paper's reference code trains both
        copies on one draw, so the two histories compare losses on the same items)."""
        c = ctx.client_id
        fl, personal, memory = split_state(dict(state.tensors))
        meta = {
            k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
            for k, v in state.metadata.items()
        }
        if message is not None and message.tensors:
            fl.update(as_copy(dict(message.tensors)))  # (the server's components replace the client's)
        batches = [list(b) for b in batches if len(b)]
        if not batches:  # nothing to train on this round: the paper's unsampled client (no training, no upload)
            return Message(), State(tensors=join_state(fl, personal, memory), metadata=meta)
        keys = list(group_by_key([s for b in batches for s in b]))
        n = sum(len(b) for b in batches)
        lr = self.config.learning_rate_at(ctx.round_idx)
        upload = Message()
        h_l: dict[str, float] = {}
        if self.uses_fl:
            fl, run = self.clients.train_copy(c, fl, batches, lr)
            h_l = run.values()
            upload = Message(tensors=flat(fl, paths(h_l)), metadata={"n": n})
        replaced: list[str] = []
        h_p_before = dict(meta["h_p"])
        if self.uses_personal:
            if self.uses_fl:
                replaced = decide(h_l, h_p_before, self.margins(h_l))
                personal = replace(personal, fl, replaced)
            personal, run = self.clients.train_copy(c, personal, batches, lr)
            meta["h_p"].update(run.values())
        meta["h_l"].update(h_l)
        meta["owned"] = sorted(set(meta["owned"]) | set(keys))
        for k in replaced:
            meta["replacements"][k] = int(meta["replacements"].get(k, 0)) + 1
        meta["last_replaced"] = replaced
        meta["rounds"] = int(meta["rounds"]) + 1
        if self.keeps_memory(ctx.round_idx):
            meta["memory"], memory = remember(meta["memory"], memory, batches, self.config.memory_items)  # type: ignore[attr-defined]
        if self.config.report_diagnostics and ctx.round_idx < self.federation.rounds:
            self._client_rows[c] = self._rows_of_client(c, keys, h_l, h_p_before, meta["h_p"], replaced)
        return upload, State(tensors=join_state(fl, personal, memory), metadata=meta)

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        """Component-wise FedAvg weighted by the clients' sample counts (:mod:`.aggregation`); each client gets the
        server's value of every component it has uploaded so far."""
        owners: dict[str, list[str]] = {k: list(v) for k, v in server_state.metadata.get("owners", {}).items()}
        rows = self._rows.setdefault(round_idx, [])
        if not self.uses_fl:
            return {c: Message() for c in uploads}, State(metadata={"owners": owners, "round": round_idx + 1})
        across = self.config.share_across_architectures  # type: ignore[attr-defined]
        sent = {c: (float(m.metadata.get("n", 0)), dict(m.tensors)) for c, m in uploads.items() if m.tensors}
        server, members = aggregate(sent, self.arch, dict(server_state.tensors), across)
        for c, (_, tensors) in sent.items():
            owners[str(c)] = sorted(set(owners.get(str(c), [])) | {component_of(name) for name in tensors})
        messages = {
            c: Message(tensors=view_for(server, owners.get(str(c), []), self.shapes(c), self.arch[c], across))
            for c in uploads
        }
        if self.config.report_diagnostics:
            sizes = [len(v) for v in members.values()]
            rows.append(
                Diagnostic(
                    key="server",
                    values={
                        "uploads": len(sent),
                        "tensor_groups": len(members),
                        "components": len({component_of(k.split("|", 1)[1]) for k in members}),
                        "clients_per_group": (sum(sizes) / len(sizes)) if sizes else None,
                    },
                )
            )
        return messages, State(tensors=server, metadata={"owners": owners, "round": round_idx + 1})

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        fl, personal, _ = split_state(dict(state.tensors))
        return self.clients.predict_copy(ctx.client_id, personal if self.answers_with == PERSONAL else fl, queries)

    def client_diagnostics(self, ctx: ClientContext) -> list[Diagnostic]:
        """Per key of the client's round: h_l, h_p before and after, the margin and whether the personal copy took
        the FL copy's components (the evaluator files them under ``client/<id>/<key>``). They are asked where the
        client trained, so the server never sees them: the round's replacements per key (what the paper's Fig. 3
        accumulates) are counted from these rows by :func:`drake_bench.methods.tap.plots.replacement_counts`."""
        return self._client_rows.pop(ctx.client_id, [])

    def round_diagnostics(self, round_idx: int) -> list[Diagnostic]:
        """The server's averaging of the round: uploads, tensor groups, components, clients per group."""
        return self._rows.pop(round_idx, [])

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """An unseen task starts from the server's components for the architecture (both copies, histories at +inf);
        without an FL copy, from the architecture's average of its clients' personal copies (SFT's rule)."""
        members = sorted(client_states) or sorted(c for c, a in self.arch.items() if a == architecture)
        rep = members[0]
        meta = self.init_client(
            ClientContext(client_id=rep, model_name="", architecture=architecture, round_idx=0, seed=0)
        ).metadata
        if self.uses_fl:
            start = as_copy(
                view_for(
                    dict(server_state.tensors),
                    self.clients.components,
                    self.shapes(rep),
                    architecture,
                    self.config.share_across_architectures,
                )
            )  # type: ignore[attr-defined]
            return State(tensors=join_state(start, start if self.uses_personal else {}, {}), metadata=meta)
        init = self.clients.initial_copy(rep)
        copies = [split_state(dict(s.tensors))[1] for s in client_states.values()]
        held = [c for c in self.clients.components if any(c in x for x in copies)]
        mean = {comp: average([x.get(comp, init[comp]) for x in copies]) for comp in held}
        return State(tensors=join_state({}, mean, {}), metadata=meta)

    # -- helpers -----------------------------------------------------------------------------------------------
    def shapes(self, client: int) -> dict[str, dict[str, tuple[int, ...]]]:
        """The client's tensor shapes per component (from its architecture's initialisation)."""
        return {
            comp: {k: tuple(t.shape) for k, t in ts.items()} for comp, ts in self.clients.initial_copy(client).items()
        }

    def _rows_of_client(
        self,
        client: int,
        keys: list[str],
        h_l: dict[str, float],
        h_p_before: dict[str, float],
        h_p: dict[str, float],
        replaced: list[str],
    ) -> list[Diagnostic]:
        rows = []
        for k in keys:
            before = h_p_before.get(k)
            rows.append(
                Diagnostic(
                    key=k,
                    values={
                        "client": client,
                        "task_key": k,
                        "h_l": h_l.get(k),
                        "h_p_before": before,
                        "h_p": h_p.get(k) if self.uses_personal else None,
                        "margin": self.config.margin(k) if self.uses_fl and self.uses_personal else None,  # type: ignore[attr-defined]
                        "replaced": k in replaced,
                        "first": before is None,
                    },
                )
            )
        return rows


class TAP(TAPBase):
    """TAP: an FL copy and a personal copy per client, margin replacement per task key, Stage 2 distillation.

    **Stage 1** (Alg. 1, App. A.1), every round and client with batches: the FL copy takes the server's value of
    every component the client owns and trains tau = ``local_steps`` steps (AdamW, fresh each call, clip 1.0); it
    is uploaded (the trained components only, with n_i); for every task key o of the round, if
    h_l[o] + m_o < h_p[o] the personal copy takes the FL copy's components on o's path (whole components, shared
    ones included); then the personal copy trains on the same batches and h_p is updated. Histories start at +inf,
    so a client's first round with a key replaces it. The server averages each component over the clients that
    uploaded it, weighted by n_i (:mod:`.aggregation`).

    **Stage 2** (§3.3 and Alg. 1's last lines, ``post_federation``), for every client: the final server components
    post-train P steps on the client's items (task loss, at eta_0) into a frozen teacher; the personal copy trains P
    steps on the same batches with task loss + beta_o tau^2 KL(teacher || student) over the answer tokens. The
    personal copy is what the evaluator scores, every round and after Stage 2.

    **Adaptations to drake_bench's clients** (docs/methods/tap.md gives each with its reason):

    * the paper's clients are ViLT/FLAVA mixture-of-experts stacks with per-dataset heads; here the clients are the
      zoo's tiny LLaVA and LLM models (frozen), and TAP's components are LoRA adapters on the language model's
      linear layers, one per component, switched per forward pass through peft (:mod:`.experts`);
    * components are keyed by what a method may see, input modality (text, one image, several images) and output
      format (yes/no, multiple choice, open, free text), not by task: the leakage guard hides task identities
      (:mod:`.keys`). A key's path is the paper's four routes (shared, modality, format, modality-format expert);
    * history values, replacement and margins are per key; margins by output type (Table 22: choice formats with
      images 0.01, text-only 0.005, open and free text 0.01); beta by output type (Table 21: choice 2e-3,
      generation 1);
    * the distillation term is over the answer tokens of the generated answer (:mod:`.distill`);
    * Stage 2 draws from the client's most recent distinct training items, kept in its own State, because
      ``post_federation`` receives no batches (:mod:`.memory`);
    * every client trains every round (the embedded benchmarks' participation is 1.0; the paper samples 2 of 30); a
      client with no batches in a round neither trains nor uploads;
    * sample counts n_i are the items a client trained on in the round (the method cannot see |D_i|);
    * the toy learning rate 3e-3 constant, rank 4 per component; weight decay 0.01 and clip 1.0 as the paper.
    """

    meta = MethodMeta(
        name="tap",
        version="1.0",
        relative_compute=2.0,
        summary="Two-stage adaptive personalization: an FL copy and a personal copy of LoRA experts keyed by input "
        "modality and answer format, margin replacement, and post-FL distillation.",
        reference=REFERENCE,
    )

    Config = TAPSettings

    def post_federation(
        self, federation: FederationContext, client_states: dict[int, State], server_state: State
    ) -> dict[int, State]:
        """Stage 2 for every client (§3.3, Alg. 1's last lines); see :meth:`stage2`."""
        owners = server_state.metadata.get("owners", {})
        return {
            c: self.stage2(federation, c, s, server_state, owners.get(str(c), []))
            for c, s in sorted(client_states.items())
        }

    def stage2(
        self, federation: FederationContext, client: int, state: State, server_state: State, owned: Sequence[str]
    ) -> State:
        """One client's Stage 2: P batches from its memory; the final server components (its FL copy with the
        server's last value of every component it owns) post-train into the teacher; TAP distils into the personal
        copy (skipping the teacher when every beta is 0, which leaves the output unchanged); FedAvg + post-train
        keeps the teacher as its model."""
        cfg = self.config
        fl, personal, memory = split_state(dict(state.tensors))
        meta = dict(state.metadata)
        items = recall(meta.get("memory", []), memory)
        if cfg.post_steps == 0 or not items:
            return state
        rng = np.random.default_rng([int(federation.seed), int(client), SALT_STAGE2])
        batches = draw_batches(items, cfg.post_steps, federation.batch_size, rng)
        final = {
            **fl,
            **as_copy(
                view_for(
                    dict(server_state.tensors),
                    owned,
                    self.shapes(client),
                    self.arch[client],
                    cfg.share_across_architectures,
                )
            ),
        }
        lr = cfg.initial_learning_rate
        keys = list(group_by_key([s for b in batches for s in b]))
        kd = self.uses_personal and any(cfg.beta(k) > 0 for k in keys)
        teacher: Copy = final
        if kd or not self.uses_personal:
            teacher, run = self.clients.train_copy(client, final, batches, lr)
            meta["stage2_teacher_loss"] = run.values()
        if not self.uses_personal:
            return State(tensors=join_state(teacher, personal, memory), metadata={**meta, "stage2_steps": len(batches)})
        logits = self.clients.teacher_logits(client, teacher, batches) if kd else None
        personal, run = self.clients.train_copy(
            client, personal, batches, lr, teacher=logits, beta=cfg.beta, temperature=cfg.temperature
        )
        meta["stage2_student_loss"] = run.values()
        return State(tensors=join_state(final, personal, memory), metadata={**meta, "stage2_steps": len(batches)})


class TAPNoKD(TAP):
    """TAP without the distillation term: Stage 2 trains the personal copy P steps on the task loss alone (beta =
    0, the paper's "No KD" rows of Tables 4-6); no teacher is trained, since nothing reads it."""

    meta = MethodMeta(
        name="tap-no-kd",
        version="1.0",
        relative_compute=2.0,
        summary="TAP with beta = 0: Stage 2 fine-tunes the personal copy on the task loss alone (the paper's KD "
        "ablation).",
        reference=REFERENCE,
    )

    Config = NoKDSettings


class FedAvgPostTrain(TAP):
    """FedAvg + post-train: TAP's FL copy alone (component-wise FedAvg of the same experts, no personal copy, no
    replacement), and after the last round the final server components fine-tuned P steps on the client's items,
    the same P batches TAP's teacher trains on (the paper's budget rule: a "+ post-train" baseline gets the P
    steps TAP's Stage 2 gets, so neither is compared on more training). A client is scored with its FL
    copy after local training every round (as FedIT), and with the post-trained model after Stage 2."""

    meta = MethodMeta(
        name="fedavg-post-train",
        version="1.0",
        relative_compute=1.0,
        summary="Component-wise FedAvg of TAP's LoRA experts, the final model fine-tuned P steps locally (a TAP "
        "baseline).",
        reference=REFERENCE,
    )

    Config = PostTrainSettings
    uses_personal = False


class TAPLocal(TAPBase):
    """Local: TAP's personal copy alone, trained on the client's data every round, nothing sent (the paper's
    "Local" rows); no Stage 2, as in the paper. Fast adaptation starts from the architecture's average of the final
    personal copies (SFT's rule)."""

    meta = MethodMeta(
        name="tap-local",
        version="1.0",
        relative_compute=1.0,
        summary="TAP's LoRA experts trained on local data only; nothing is shared (a TAP baseline).",
        reference=REFERENCE,
    )

    Config = RoundSettings
    uses_fl = False
