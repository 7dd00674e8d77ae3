from django.urls import path

from . import views

urlpatterns = [path("authors-books/", views.authors_books)]
