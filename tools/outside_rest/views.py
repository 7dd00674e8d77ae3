"""Pinry's API views, as written: core/views.py, core/permissions.py and users/views.py's viewsets.

The views read upstream's (``filter_fields`` reads ``filterset_fields``, see the package docstring); their
writes are REST framework's generic ones, calling the serializers' ``create`` and ``update``.
``TagAutoCompleteViewSet.list`` keeps its ``cache_page`` (the tool runs with Django's dummy cache, so each
variant sends its own statements).
"""
from django.conf import settings
from django.utils.decorators import method_decorator
from django.views.decorators.cache import cache_page
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import mixins, permissions, routers, viewsets
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.permissions import BasePermission
from rest_framework.viewsets import GenericViewSet
from taggit.models import Tag

from . import serializers as api
from .models import Board, Image, Pin, User
from .serializers import UserSerializer, filter_private_board, filter_private_pin

# core/permissions.py

class IsOwnerOrReadOnly(permissions.IsAuthenticatedOrReadOnly):
    """
    Object-level permission to only allow owners of an object to edit it.
    Assumes the model instance has an `owner` attribute.
    """
    def __init__(self, owner_field_name="owner"):
        self.__owner_field_name = owner_field_name

    def __call__(self):
        return self

    def has_object_permission(self, request, view, obj):
        # Read permissions are allowed to any request,
        # so we'll always allow GET, HEAD or OPTIONS requests.
        if request.method in permissions.SAFE_METHODS:
            return True

        return getattr(obj, self.__owner_field_name) == request.user


class OwnerOnlyIfPrivate(permissions.BasePermission):
    def __init__(self, owner_field_name="owner"):
        self.__owner_field_name = owner_field_name

    def __call__(self):
        return self

    def has_object_permission(self, request, view, obj):
        if getattr(obj, "private"):
            return request.user == getattr(obj, self.__owner_field_name)
        return True


# core/views.py

class ImageViewSet(mixins.CreateModelMixin, GenericViewSet):
    queryset = Image.objects.all()
    serializer_class = api.ImageSerializer

    def create(self, request, *args, **kwargs):
        return super(ImageViewSet, self).create(request, *args, **kwargs)


class PinViewSet(viewsets.ModelViewSet):
    serializer_class = api.PinSerializer
    filter_backends = (DjangoFilterBackend, SearchFilter, OrderingFilter)
    filterset_fields = ("submitter__username", 'tags__name', "pins__id")   # deviation: upstream's filter_fields
    ordering_fields = ('-id', )
    ordering = ('-id', )
    permission_classes = [IsOwnerOrReadOnly("submitter"), OwnerOnlyIfPrivate("submitter")]

    def get_queryset(self):
        query = Pin.objects.all()
        request = self.request
        return filter_private_pin(request, query)


class BoardViewSet(viewsets.ModelViewSet):
    serializer_class = api.BoardSerializer
    filter_backends = (DjangoFilterBackend, OrderingFilter, SearchFilter)
    search_fields = ("name", )
    filterset_fields = ("submitter__username", )   # deviation: upstream's filter_fields
    ordering_fields = ('-id', )
    ordering = ('-id', )
    permission_classes = [IsOwnerOrReadOnly("submitter"), OwnerOnlyIfPrivate("submitter")]

    def get_queryset(self):
        return filter_private_board(self.request, Board.objects.all())


class BoardAutoCompleteViewSet(
    mixins.ListModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = api.BoardAutoCompleteSerializer
    filter_backends = (DjangoFilterBackend, OrderingFilter)
    filterset_fields = ("submitter__username", )   # deviation: upstream's filter_fields
    ordering_fields = ('-id', )
    ordering = ('-id', )
    pagination_class = None
    permission_classes = [OwnerOnlyIfPrivate("submitter"), ]

    def get_queryset(self):
        return filter_private_board(self.request, Board.objects.all())


class TagAutoCompleteViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    queryset = Tag.objects.all()
    serializer_class = api.TagAutoCompleteSerializer
    pagination_class = None

    @method_decorator(cache_page(60 * 5))
    def list(self, request, *args, **kwargs):
        return super(TagAutoCompleteViewSet, self).list(
            request,
            *args,
            **kwargs
        )


# users/views.py

class UserViewSet(
    mixins.RetrieveModelMixin,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    GenericViewSet,
):
    class Permission(BasePermission):
        def has_permission(self, request, view):
            if not request.method == "POST":
                return True
            return settings.ALLOW_NEW_REGISTRATIONS

        def has_object_permission(self, request, view, obj):
            return request.user == obj

    permission_classes = [Permission, ]
    serializer_class = UserSerializer
    pagination_class = None

    def get_queryset(self):
        if self.request.user.is_anonymous:
            return User.objects.none()
        return User.objects.filter(id=self.request.user.id)


VIEWSETS = {"pin": PinViewSet, "image": ImageViewSet, "board": BoardViewSet, "tag": TagAutoCompleteViewSet,
            "board-auto-complete": BoardAutoCompleteViewSet, "user": UserViewSet}


def routers_for(views: dict[str, type]) -> tuple[routers.DefaultRouter, routers.DefaultRouter]:
    """core/views.py's and users/views.py's routers, over *views* (``VIEWSETS`` or a variant's)."""
    drf_router = routers.DefaultRouter()
    drf_router.register(r'pins', views["pin"], basename="pin")
    drf_router.register(r'images', views["image"])
    drf_router.register(r'boards', views["board"], basename="board")
    drf_router.register(r'tags-auto-complete', views["tag"])
    # deviation: upstream registers this one with basename="board" a second time
    drf_router.register(r'boards-auto-complete', views["board-auto-complete"], basename="board-auto-complete")
    users_router = routers.DefaultRouter()
    users_router.register(r'users', views["user"], basename="user")
    return drf_router, users_router
