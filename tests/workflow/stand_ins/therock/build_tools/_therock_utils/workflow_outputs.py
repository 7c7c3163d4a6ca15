"""Stand-in for TheRock's ``_therock_utils.workflow_outputs``: where a run's outputs are."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkflowOutputRoot:
    bucket: str
    external_repo: str
    run_id: str
    platform: str

    @property
    def prefix(self) -> str:
        return f"{self.external_repo}{self.run_id}-{self.platform}"

    @classmethod
    def from_workflow_run(
        cls,
        run_id: str,
        platform: str,
        github_repository: str | None = None,
        workflow_run: dict[str, object] | None = None,
        lookup_workflow_run: bool = False,
        release_type: str | None = None,
    ) -> WorkflowOutputRoot:
        if github_repository != "ROCm/TheRock":
            raise SystemExit(f"stand-in: serves ROCm/TheRock runs, not {github_repository}")
        return cls("therock-ci-artifacts", "", run_id, platform)
