"""What ``langgraph dev`` serves besides the graph: API-key users (``auth``) and our own HTTP routes."""
