"""The ``spawn_subagent`` tool's handler: a parent agent's way into the spawn use case.

The child is requested from where the parent lives: the parent's bound
conversation if it has one, else where the parent itself was requested
(a parent that is a subagent without a thread). Flags, agent checks and
cleanup are the service's, exactly as for a user's ``/agents spawn``.
"""

from __future__ import annotations

from core.agent.builtin_tools import SpawnHandler, SpawnSubagentArgs
from core.agent.tools import ToolContext
from core.bindings.records import ConversationRef
from core.subagents.service import SpawnRequest, SubagentService

__all__ = ["spawn_tool_handler"]


def spawn_tool_handler(service: SubagentService) -> SpawnHandler:
    async def handle(args: SpawnSubagentArgs, context: ToolContext) -> str:
        parent = await service.get(context.session_key)
        binding = service.binding_of(context.session_key)
        requester: ConversationRef | None
        if binding is not None:
            requester = binding.conversation
            scope = binding.scope
        else:
            requester = parent.requester if parent else None
            scope = parent.scope if parent else None
        spawned = await service.spawn(
            SpawnRequest(
                task=args.task,
                agent=args.agent,
                mode=args.mode,
                thread=args.thread,
                parent_session_key=context.session_key,
                requester=requester,
                requested_by=parent.requested_by if parent else None,
                scope=str(scope) if scope is not None else None,
            )
        )
        where = " in its own thread" if spawned.binding else ""
        return (
            f"started subagent {spawned.record.session_key} ({spawned.display_name}){where}; "
            "its result will be sent to you when it finishes"
        )

    return handle
