"""What people read: markdown views, the timeline, following threads, routing graphs."""
