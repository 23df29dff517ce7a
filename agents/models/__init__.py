"""Model providers behind one `ChatModel` protocol (OpenAI tool-calling format)."""

from agents.models.base import ChatModel, ChatReply, Message, ModelError, ToolCall, ToolDefinition
from agents.models.local import LocalModel, smollm2_path
from agents.models.openai_compatible import OpenAICompatible
from agents.models.scripted import ScriptedCall, ScriptedModel

__all__ = [
    "ChatModel",
    "ChatReply",
    "LocalModel",
    "Message",
    "ModelError",
    "OpenAICompatible",
    "ScriptedCall",
    "ScriptedModel",
    "ToolCall",
    "ToolDefinition",
    "smollm2_path",
]
